// Package core is Janus's one data model and its deterministic state machine.
//
// Both protocol faces translate their requests into the small language of
// this package (an Op, usually a Txn of compares and operations), the
// replication layer orders the encoded ops into a log, and Apply turns one
// logged op into a Batch: the writes to make, the events to publish and the
// result to hand back. Apply is a pure function of the state it reads
// through a View and of the entry it is given: it reads no clock, draws no
// random number, iterates no map and does no I/O of its own, so every
// replica that applies the same log reaches byte-identical state.
//
// The model is a single ordered keyspace of nodes. Every key is an etcd key;
// the keys that are valid ZooKeeper paths (IsTreePath) also form a tree, with
// per-parent records (Dir) that hold ZooKeeper's child metadata. A parent
// that only exists because something below it exists is implicit: ZooKeeper
// clients see it, etcd ranges do not.
//
// core knows nothing of gRPC, jute, sockets or Badger.
package core
