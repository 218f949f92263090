// Package cluster starts Janus ensembles on loopback for tests: separate
// bin/janus processes that can be killed (SIGKILL), stopped and resumed
// (SIGSTOP/SIGCONT, a stand-in for a partition), wiped and restarted; and
// a workload that drives both client faces at once while faults happen,
// recording histories for package linearize.
//
// Every process belongs to the test that started it: cleanup kills what is
// still running, and a failing test prints each node's log tail.
package cluster
