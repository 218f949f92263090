// Package migrate copies a live ZooKeeper tree or a live etcd v3 keyspace
// into Janus (or out of it, into a real ZooKeeper or etcd), follows the
// source's changes, cuts over and verifies the copy against its source. It
// is the logic of `janus migrate`.
//
// It is a package of its own, beside the server rather than in it, because
// it is a client-side tool: it talks to the source and to the target only
// through their public protocols (go-zookeeper, clientv3, and for the
// ZooKeeper calls go-zookeeper lacks, addWatch and getAllChildrenNumber, a
// one-session client on zkapi/jute's codec, in zkstream.go), exactly as an
// operator's own tooling would, and the server never imports it. Keeping
// it out of the server's packages keeps the server's dependency graph free
// of client libraries and lets the tool run against any Janus version that
// speaks the protocols.
//
// What is copied, and why:
//
//   - From ZooKeeper (zk://host:port[,host:port...][/path]): every
//     non-ephemeral znode under path (the whole tree without /zookeeper when
//     no path is given), with its data. Ephemeral znodes belong to live
//     sessions of the source; they are reported and skipped, since their
//     owners re-create them when they reconnect to Janus. Container and TTL
//     nodes are copied as persistent nodes: ZooKeeper does not tell a client
//     a node's mode (their ephemeralOwner reads 0). Written to the target's
//     ZooKeeper face (--to zk://...), each node keeps its ACL; ACLs are set
//     after the whole tree is written, so a restrictive ACL never blocks the
//     copy of its subtree. Written to the target's etcd face (--to
//     etcd://...), only paths and data are copied: etcd requests carry no
//     ACLs, and the number of nodes whose ACL was dropped is reported. The
//     source session needs read access to every node, and ADMIN on nodes
//     with digest ACLs, whose digest ZooKeeper otherwise shows as "x"
//     (Config.Auth; a hidden digest stops the copy, ErrACLHidden). With
//     Follow, a persistent recursive watch is set before the listing and
//     every notified path is read again and applied (zkfollow.go says why
//     that converges, and how a lost session is recovered by a re-list).
//   - From etcd (etcd://host:port[,host:port...][/prefix]): every key under
//     prefix (all keys when none is given) at one source revision, through
//     the target's etcd face, in transactions of Config.BatchSize puts. Keys
//     attached to a lease belong to live clients and are reported and
//     skipped, like ephemerals. With Follow, the copy then follows the
//     source's watch from that revision, applying each watch response in
//     one target transaction, until the context ends (the cut-over).
//
// A cut-over (the end of a follow, or Config.Cutover) applies everything
// the source had applied when it began, then verifies; Run returns nil only
// if both sides are then equal.
//
// Keys under /zookeeper are the target's own (ZooKeeper's system subtree)
// and are neither copied nor compared.
//
// The verification pass reads both sides afresh and prints every difference
// (a node only in the source, only in the target, different data, different
// ACL when ACLs were copied); Run and Verify return ErrDifferences when
// there is any. Nodes a live source creates or deletes during verification
// show up as differences: verify once writes to the source have stopped.
package migrate
