package core

// Space quota, after etcd's (etcdserver/quota.go and the capped applier in
// etcdserver/apply.go). A member checks, before proposing an op, whether
// the state's size plus the op's SpaceCost stays under the quota; if not it
// raises a NOSPACE alarm through the log and refuses the op. Once the alarm
// is replicated state, Apply refuses every op that would grow the state
// (CheckSpace), on every member alike, until an operator disarms it. What
// shrinks the state or frees space (deletes, lease revokes, Compact, alarm
// changes) still runs, so that an operator can make room.
//
// CheckSpace is the one place that decides "NOSPACE active ⇒ refuse": any
// cause that raises NOSPACE (the quota, a full disk) gets the same refusal.

// kvOverhead and leaseOverhead are etcd's estimates of what a put and a
// lease grant add besides their key and value (etcd's quota.go).
const (
	kvOverhead    = 256
	leaseOverhead = 64
)

// SpaceCost estimates how many bytes op may add to the state: etcd's
// cost of a put (key, value and an overhead) for every write that stores a
// value (etcd Put, ZooKeeper create, setData, setACL), the larger of a
// Txn's two branches, and an overhead for an etcd lease grant. Ops that
// only read, delete, compact or change alarms cost 0, and so do ZooKeeper
// sessions: a client needs one to read and delete while space is short.
func SpaceCost(op *Op) int64 {
	switch {
	case op.Txn != nil:
		return txnCost(op.Txn, 1)
	case op.LeaseGrant != nil && op.LeaseGrant.Session == nil:
		return leaseOverhead
	}
	return 0
}

func txnCost(t *Txn, depth int) int64 {
	if depth > MaxTxnDepth {
		return 0 // CheckOp refuses it anyway
	}
	return max(opsCost(t.Success, depth), opsCost(t.Failure, depth))
}

func opsCost(ops []TxnOp, depth int) int64 {
	var c int64
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case OpPut, OpCreate, OpSetData:
			c += kvOverhead + int64(len(op.Key)) + int64(len(op.Value))
		case OpSetACL:
			c += kvOverhead + int64(len(op.Key))
		case OpTxn:
			if op.Txn != nil {
				c += txnCost(op.Txn, depth+1)
			}
		}
	}
	return c
}

// NoSpace reports whether a NOSPACE alarm is active among alarms, for any
// member: etcd caps the whole cluster once any member runs out of space.
func NoSpace(alarms []Alarm) bool {
	for _, a := range alarms {
		if a.Type == AlarmNoSpace {
			return true
		}
	}
	return false
}

// ErrNoSpace refuses an op that would grow the state while a NOSPACE alarm
// is active, and a write a member cannot log because its disk is full or
// read-only (see server's diskfull.go): nothing was applied either way and
// reads still work (etcd: "etcdserver: mvcc: database space exceeded";
// ZooKeeper: SystemError).
var ErrNoSpace = &Error{Code: CodeNoSpace}

// CheckSpace refuses op with ErrNoSpace when a NOSPACE alarm is active
// among alarms and op would grow the state (SpaceCost above 0). It depends
// only on replicated state, so Apply calls it and every member refuses
// alike; members call it before proposing too, to answer early.
func CheckSpace(alarms []Alarm, op *Op) error {
	if NoSpace(alarms) && SpaceCost(op) > 0 {
		return ErrNoSpace
	}
	return nil
}
