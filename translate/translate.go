// Package translate states the rules by which one Janus tree is at once an
// etcd v3 keyspace and a ZooKeeper namespace, as small pure functions.
//
// The faces (etcdapi, zkapi) and the core already implement these rules;
// this package names them, so that clients, tools (the migration tool) and
// tests can apply the same mapping and so that each rule has one tested,
// documented statement. It does no I/O and keeps no state. Where the core
// already owns a rule (core.IsTreePath, core.StatOf, core.ParentPath) the
// functions here call it rather than restate it.
//
// The rules, each with the function that states it:
//
//   - An etcd key is a znode exactly when it is a valid ZooKeeper path
//     (IsZNode); the znode's path is the key's bytes (KeyToPath, PathToKey).
//     Other keys are seen by etcd clients only.
//   - A znode whose ancestors were never created (etcd wrote /a/b/c alone)
//     has implicit parents (ImplicitParents): ZooKeeper clients see them as
//     empty nodes with version 0, etcd ranges do not return them, and they
//     vanish with their last child.
//   - The /zookeeper subtree is ZooKeeper's own (IsReserved). Its system
//     nodes (/zookeeper, /zookeeper/config, /zookeeper/quota) are not
//     stored (core.IsSystemPath), so a brand-new Janus shows etcd clients
//     no key at revision 1; what ZooKeeper clients create below them
//     (quota nodes) are ordinary keys.
//   - ZooKeeper version = etcd version - 1 (ZKVersion, EtcdVersion).
//   - Stat fields are KeyValue fields (StatOfKeyValue, KeyValueOfStat):
//     czxid = create_revision, mzxid = mod_revision, ephemeralOwner = lease.
//   - A ZooKeeper session is an etcd lease with the same ID (LeaseOfSession,
//     SessionOfLease), whose TTL is the session timeout rounded up to whole
//     seconds (LeaseTTL).
//   - A sequential znode's suffix orders its siblings as their etcd
//     create_revision does (SequentialName, ParseSequential).
//   - A lock or election holder's fencing token is its node's create
//     revision (FencingToken, FencingTokenOfStat).
package translate

import (
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/januskv/janus/core"
)

// ReservedPath is the subtree ZooKeeper keeps for itself (/zookeeper/config,
// /zookeeper/quota). Its system nodes are part of the tree without being
// stored (see core.IsSystemPath); nodes created below them are ordinary
// keys.
const ReservedPath = "/zookeeper"

// IsZNode reports whether the etcd key is also a znode: whether ZooKeeper
// accepts it as a path. Keys without a leading '/', with an empty, "." or
// ".." component, with a trailing '/', or with characters ZooKeeper forbids
// are visible to etcd clients only.
func IsZNode(key []byte) bool { return core.IsTreePath(key) }

// KeyToPath returns the znode path of an etcd key, and false when the key
// is not a znode.
func KeyToPath(key []byte) (string, bool) {
	if !IsZNode(key) {
		return "", false
	}
	return string(key), true
}

// PathToKey returns the etcd key of a znode path: its bytes, unchanged.
// There is no prefix and no escaping, so a key written by either protocol
// is found by the other under the same name.
func PathToKey(path string) []byte { return []byte(path) }

// IsReserved reports whether path is /zookeeper or below it.
func IsReserved(path []byte) bool {
	const r = ReservedPath
	return len(path) >= len(r) && string(path[:len(r)]) == r && (len(path) == len(r) || path[len(r)] == '/')
}

// ImplicitParents returns the ancestors of the znode path, nearest first,
// excluding the root. When path is written through etcd alone, those of
// them that do not exist are what ZooKeeper clients see as implicit parents.
func ImplicitParents(path []byte) [][]byte {
	var out [][]byte
	for p, ok := core.ParentPath(path); ok && len(p) > 1; p, ok = core.ParentPath(p) {
		out = append(out, p)
	}
	return out
}

// ZKVersion is the ZooKeeper data version of a key at etcd version v. etcd
// counts a create as version 1 and reports 0 for an absent key; ZooKeeper
// counts a create as version 0. An implicit parent, absent to etcd, has
// ZooKeeper version 0.
func ZKVersion(v int64) int32 {
	if v <= 0 {
		return 0
	}
	return int32(v - 1)
}

// EtcdVersion is the etcd version of a znode at ZooKeeper version v: what an
// etcd Txn must compare against to guard the same write as a ZooKeeper
// setData or check with expected version v. The ZooKeeper wildcard -1 has no
// etcd equivalent (omit the compare); it is returned as 0 with false.
func EtcdVersion(v int32) (int64, bool) {
	if v < 0 {
		return 0, false
	}
	return int64(v) + 1, true
}

// StatOfKeyValue computes the ZooKeeper Stat of a znode from what etcd
// reports for its key, with d its child metadata (nil if it never had a
// child; etcd does not report it). Times and ACL metadata, which etcd does
// not carry, are zero.
func StatOfKeyValue(kv *mvccpb.KeyValue, d *core.Dir) core.Stat {
	n := &core.Node{
		Key:       kv.Key,
		Value:     kv.Value,
		CreateRev: kv.CreateRevision,
		ModRev:    kv.ModRevision,
		Version:   kv.Version,
		Lease:     kv.Lease,
	}
	return core.StatOf(n, d)
}

// KeyValueOfStat is the etcd KeyValue of the znode at path with data and
// Stat s, as an etcd Range of that key returns it. An implicit parent has no
// KeyValue (ok is false); ZooKeeper clients cannot tell one from an empty
// node created at version 0, so the caller says which it is.
func KeyValueOfStat(path string, data []byte, s core.Stat, implicit bool) (kv *mvccpb.KeyValue, ok bool) {
	if implicit {
		return nil, false
	}
	v, _ := EtcdVersion(s.Version)
	return &mvccpb.KeyValue{
		Key:            PathToKey(path),
		Value:          data,
		CreateRevision: s.Czxid,
		ModRevision:    s.Mzxid,
		Version:        v,
		Lease:          s.EphemeralOwner,
	}, true
}

// LeaseOfSession is the etcd lease ID of a ZooKeeper session: its ID.
func LeaseOfSession(sessionID int64) int64 { return sessionID }

// SessionOfLease is the ZooKeeper session ID of an etcd lease (for any
// lease: a key attached to an etcd lease is an ephemeral znode whose
// ephemeralOwner is the lease ID).
func SessionOfLease(leaseID int64) int64 { return leaseID }

// LeaseTTL is the TTL, in seconds, of the lease that is a ZooKeeper session
// with the negotiated timeout: the timeout rounded up to whole seconds.
func LeaseTTL(sessionTimeoutMs int32) int64 { return (int64(sessionTimeoutMs) + 999) / 1000 }

// sequentialDigits is the width of ZooKeeper's sequential suffix (%010d).
const sequentialDigits = 10

// SequentialName is the name ZooKeeper gives the seq-th sequential child
// created with the given prefix.
func SequentialName(prefix string, seq int32) string {
	return string(core.AppendSequentialSuffix([]byte(prefix), seq))
}

// ParseSequential splits a sequential node's name into its prefix and
// sequence number, and reports false for a name without a 10-digit suffix.
// Among siblings created sequentially, ordering by this number is ordering
// by etcd create_revision: the suffix is issued in commit order.
func ParseSequential(name string) (prefix string, seq int32, ok bool) {
	if len(name) < sequentialDigits {
		return "", 0, false
	}
	cut := len(name) - sequentialDigits
	n, err := strconv.ParseInt(name[cut:], 10, 32)
	if err != nil || n < 0 || name[cut] == '+' || name[cut] == '-' {
		return "", 0, false
	}
	return name[:cut], int32(n), true
}

// FencingToken is the fencing token of the holder of a lock or election
// whose ownership key is kv: its create revision. It only grows from one
// holder to the next, so a guarded resource that remembers the highest
// token it has seen can refuse a holder that has lost the lock.
func FencingToken(kv *mvccpb.KeyValue) int64 { return kv.CreateRevision }

// FencingTokenOfStat is the same token seen by a ZooKeeper client: the
// czxid of its lock node.
func FencingTokenOfStat(s core.Stat) int64 { return s.Czxid }
