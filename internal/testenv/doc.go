// Package testenv holds helpers that start and locate the real reference
// servers and clients for tests; never imported by the server.
//
// Janus claims to be a drop-in etcd v3 and ZooKeeper server, so its tests
// compare it against the real things: ZooKeeper 3.8 and zkCli.sh from Debian's
// zookeeper package, kazoo from python3-kazoo, Curator 5 from
// libcurator-*-java, an embedded etcd v3.7.3 and the etcd and etcdctl v3.7.3
// binaries built from this module's tool block.
//
// Every helper takes a testing.TB, picks free loopback ports, keeps its data
// in t.TempDir, and registers a t.Cleanup that stops exactly what it started.
// A missing dependency skips the test on a developer machine and fails it in
// CI (CI=true), through Need.
package testenv
