package core

// Entry is one logged op with the facts the leader stamped on it. Apply
// reads time only from here.
type Entry struct {
	Index uint64 // log position; distinct and increasing across entries
	Time  int64  // leader's wall clock at proposal, unix milliseconds
	Op    Op
}

// Op is one request to the state machine: exactly one field is set.
type Op struct {
	Txn         *Txn
	LeaseGrant  *LeaseGrant
	LeaseRevoke *LeaseRevoke
	Compact     *Compact
	HashCheck   *HashCheck
	HashReport  *HashReport
	Alarm       *AlarmChange
	Auth        *AuthChange

	// AuthCheck is not an op but a condition on one: the etcd auth state
	// the face checked the op's permissions against (nil: unchecked, as
	// for ZooKeeper requests and the member's own ops).
	AuthCheck *AuthCheck

	// Origin says which face proposed the op. It is metadata: Apply
	// carries it to the op's Batch and events, and decides nothing by it.
	Origin Origin
}

// Origin names where a logged op came from, so that a watcher's delivery
// can tell whether the change crossed from one protocol to the other.
type Origin uint8

const (
	// OriginUnknown is an op logged before origins were recorded.
	OriginUnknown Origin = iota
	// OriginEtcd is an etcd client's request.
	OriginEtcd
	// OriginZooKeeper is a ZooKeeper client's request, or the ZooKeeper
	// face's own (closing a session).
	OriginZooKeeper
	// OriginMember is the member's own op: a lease or session that
	// expired, a container or TTL node reaped, a compaction it scheduled,
	// a corruption check, an alarm.
	OriginMember
)

// String is the origin's name as metric labels use it.
func (o Origin) String() string {
	switch o {
	case OriginEtcd:
		return "etcd"
	case OriginZooKeeper:
		return "zookeeper"
	case OriginMember:
		return "member"
	}
	return "unknown"
}

// HashCheck marks a point in the log where every member hashes its state
// (the state right after this entry) and reports the hash with a
// HashReport. It changes nothing.
type HashCheck struct{}

// HashReport is one member's hash of its state right after the HashCheck
// entry at Index. It changes nothing: members compare reports as they
// apply them (see package server).
type HashReport struct {
	Member uint64
	Index  uint64
	Hash   uint64
}

// AlarmChange raises (Activate) or clears an alarm. Raising one that is
// active, or clearing one that is not, changes nothing.
type AlarmChange struct {
	Activate bool
	Alarm    Alarm
}

// LeaseGrant creates a lease (or a ZooKeeper session when Session is set).
// The proposer chooses the ID; Apply refuses one that exists.
type LeaseGrant struct {
	ID      int64
	TTL     int64
	Session *Session
}

// LeaseRevoke ends a lease and deletes every key attached to it, all at one
// revision.
type LeaseRevoke struct {
	ID int64
}

// Compact makes revisions below Rev unreadable.
type Compact struct {
	Rev int64
}

// Txn is the one transaction shape both faces share: if every compare holds,
// the Success ops run, otherwise the Failure ops do. Ops run in order and see
// the writes of the ops before them. If an op fails (a ZooKeeper op whose
// precondition does not hold, a put naming a missing lease) the whole Txn is
// rolled back and the result names the failed op.
type Txn struct {
	Compares []Compare
	Success  []TxnOp
	Failure  []TxnOp
	// Auth is the identity ZooKeeper ACLs are checked against. Nil skips ACL
	// checks (etcd requests with auth off, or by root). An etcd request
	// with auth on carries etcd:<user>, and its etcd ops are checked as
	// ZooKeeper's nearest ones: Range as getData (READ on every node),
	// Put as setData (WRITE) or create (CREATE on the parent), DeleteRange
	// as delete (DELETE on each node's parent).
	Auth []ID
}

// CompareTarget says which field of a key a Compare looks at.
type CompareTarget uint8

const (
	CompareVersion CompareTarget = iota
	CompareCreateRev
	CompareModRev
	CompareValue
	CompareLease
)

// CompareResult is the relation a Compare requires.
type CompareResult uint8

const (
	CompareEqual CompareResult = iota
	CompareGreater
	CompareLess
	CompareNotEqual
)

// Compare is an etcd compare: it holds when the target field of every key in
// [Key, End) (just Key when End is nil) stands in Result to the operand.
type Compare struct {
	Key    []byte
	End    []byte
	Target CompareTarget
	Result CompareResult
	Int    int64  // operand for version, revisions and lease
	Value  []byte // operand for CompareValue
}

// OpKind names the operation a TxnOp carries.
type OpKind uint8

const (
	OpRange OpKind = iota + 1
	OpPut
	OpDeleteRange
	OpTxn
	OpCreate
	OpDelete
	OpSetData
	OpCheck
	OpSetACL
	OpGet // a ZooKeeper read inside a multiRead-style txn: node and stat
)

// TxnOp is one operation of a Txn. The etcd ops (Range, Put, DeleteRange,
// Txn) have etcd's semantics; the ZooKeeper ops (Create, Delete, SetData,
// Check, SetACL) have ZooKeeper's, including its preconditions and ACLs.
type TxnOp struct {
	Kind OpKind

	Key []byte // every kind
	End []byte // Range, DeleteRange

	// Range
	Range *RangeOptions

	// Put, Create, SetData
	Value []byte
	// Put
	Lease       int64
	PrevKV      bool // Put, DeleteRange
	IgnoreValue bool
	IgnoreLease bool

	// Create
	Create *CreateOptions

	// Delete, SetData, Check (ZooKeeper version, -1 for any); SetACL (aversion)
	ExpectedVersion int32
	// SetACL
	ACL []ACL

	// Txn
	Txn *Txn
}

// CreateOptions are the ZooKeeper create flags.
type CreateOptions struct {
	Mode       Mode
	Sequential bool
	Lease      int64 // owning session for an ephemeral node
	TTL        int64 // milliseconds, for ModeTTL
	ACL        []ACL
}

// SortOrder and SortTarget follow etcd's RangeRequest.
type SortOrder uint8

const (
	SortNone SortOrder = iota
	SortAscend
	SortDescend
)

type SortTarget uint8

const (
	SortByKey SortTarget = iota
	SortByVersion
	SortByCreate
	SortByMod
	SortByValue
)

// RangeOptions are etcd's RangeRequest options.
type RangeOptions struct {
	// Rev is the revision to read at, 0 for the current one. Inside a
	// Txn, Apply only checks that the revision is readable (refusing the
	// whole Txn otherwise) and leaves the range's result empty: the
	// caller answering the client reads it from a View at Rev.
	Rev          int64
	Limit        int64
	SortOrder    SortOrder
	SortTarget   SortTarget
	KeysOnly     bool
	CountOnly    bool
	MinModRev    int64
	MaxModRev    int64
	MinCreateRev int64
	MaxCreateRev int64
}
