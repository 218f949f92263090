// Package linearize records operation histories from concurrent etcd and
// ZooKeeper clients and checks them: linearizability against sequential
// models with github.com/anishathalye/porcupine, and the safety properties
// a linearizability check does not cover on its own (acknowledged writes
// survive, revisions never go back, watch streams are gap-free, lock
// fencing tokens are unique).
//
// Histories follow the usual convention for operations whose outcome the
// client cannot know (a timeout, a lost connection): a write that failed
// that way is recorded with an "unknown" output and a return time at the
// end of time, so the checker may place its effect anywhere after its call,
// including never (placed last, it is observed by nothing). A read that
// failed is dropped: it observed nothing.
//
// A check proves something or fails: a history the checker cannot finish
// in its time fails like an illegal one, and either is saved with its run's
// seed for TestReplayHistory. Workloads keep histories small (many keys,
// few operations per key) so the check finishes on a busy machine.
//
// Nothing here is imported by the server; it is a test library.
package linearize
