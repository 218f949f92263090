package core

import "bytes"

// Storage limits. Everything Apply writes must fit the store, or applying a
// committed entry would fail on every member alike and stop the cluster. So
// the faces check each request with CheckOp before proposing it, answering
// with their protocol's error, and Apply checks again (an entry may reach
// the log some other way: an older member, a damaged or hostile record),
// refusing what is over a limit as it refuses any bad request.
const (
	// storeMaxKey is the longest key the store's engine takes (Badger's
	// maxKeySize in txn.go).
	storeMaxKey = 65000
	// storeKeyOverhead is the most the store's key layout adds to a key
	// or path: a lease attachment record's key is a prefix byte, the
	// lease id (8 bytes) and the key. A node record adds one byte, a Dir
	// record one, a child-index record two (prefix and separator). The
	// store's tests check this stays true.
	storeKeyOverhead = 9
	// MaxKeyBytes is the longest key (etcd) or path (ZooKeeper, with its
	// sequential suffix) a write may store.
	MaxKeyBytes = storeMaxKey - storeKeyOverhead

	// MaxRecordBytes bounds one stored record: a node's encoding (value
	// and ACL) and the event record of one revision (the keys it changed,
	// with the few nodes replay cannot read back). The store's engine
	// refuses a value larger than its value log file (64 MiB); the store's
	// tests check this stays below it.
	MaxRecordBytes = 32 << 20

	// MaxTxnDepth bounds how deeply Txns nest. etcd has no such limit of
	// its own: its max-txn-ops (128 by default) counts nested ops, so a
	// chain nests at most max-txn-ops+1 deep, and protobuf's decoder
	// refuses messages nested over 10,000 deep, two per Txn level
	// (RequestOp, TxnRequest). So no request an etcd client can send
	// nests this deep; the limit guards the recursive decoder and Apply
	// against a log record no face would build.
	MaxTxnDepth = 10000

	// MaxOpBytes is the largest encoded op the log takes: the member
	// configures its log with it, and a request over it is refused before
	// it is proposed.
	MaxOpBytes = 8 << 20
)

// CheckOp refuses an op that Apply could not store whatever the state: a
// key or path over MaxKeyBytes, a value or ACL over MaxRecordBytes, Txns
// nested deeper than MaxTxnDepth, a Txn op without its Txn. The refusal is
// an *Error the faces map to their protocol's "invalid argument" answer.
// Limits that depend on the state (the size of a node after an op keeps its
// old value, the event record of a delete of many keys) are Apply's alone.
func CheckOp(op *Op) error {
	switch {
	case op.Txn != nil:
		return checkTxn(op.Txn, 1)
	case op.LeaseGrant != nil:
		if s := op.LeaseGrant.Session; s != nil && len(s.Password) > MaxRecordBytes/2 {
			return errCode(CodeTooLarge, nil)
		}
	}
	return nil
}

func checkTxn(t *Txn, depth int) error {
	if depth > MaxTxnDepth {
		return errCode(CodeTooDeep, nil)
	}
	for _, ops := range [][]TxnOp{t.Success, t.Failure} {
		for i := range ops {
			if err := checkTxnOp(&ops[i], depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// sequentialSuffixBytes is the longest suffix a sequential create adds:
// ten digits, or eleven characters for a wrapped, negative counter.
const sequentialSuffixBytes = 11

func checkTxnOp(op *TxnOp, depth int) error {
	keyLen := len(op.Key)
	switch op.Kind {
	case OpTxn:
		if op.Txn == nil {
			return errCode(CodeBadArguments, nil)
		}
		return checkTxn(op.Txn, depth+1)
	case OpCreate:
		if op.Create != nil && op.Create.Sequential {
			keyLen += sequentialSuffixBytes
		}
		if op.Create != nil && aclBytes(op.Create.ACL) > MaxRecordBytes/2 {
			return errCode(CodeTooLarge, nil)
		}
	case OpSetACL:
		if aclBytes(op.ACL) > MaxRecordBytes/2 {
			return errCode(CodeTooLarge, nil)
		}
	case OpPut, OpSetData:
	default:
		// Reads and deletes store no key of their own.
		return nil
	}
	if keyLen > MaxKeyBytes {
		return errCode(CodeKeyTooLong, nil)
	}
	if len(op.Value) > MaxRecordBytes/2 {
		return errCode(CodeTooLarge, nil)
	}
	return nil
}

// aclBytes bounds the bytes an ACL adds to a node record.
func aclBytes(acl []ACL) int {
	n := 0
	for _, a := range acl {
		n += len(a.ID.Scheme) + len(a.ID.ID) + 3*10
	}
	return n
}

// nodeRecordBytes bounds the size of n's stored encoding (AppendNode): its
// value, its ACL and at most 10 bytes for each of its few integers.
func nodeRecordBytes(n *Node) int {
	if n == nil {
		return 1
	}
	return 128 + len(n.Value) + aclBytes(n.ACL)
}

// eventRecordBytes bounds the size of the event record the store keeps for
// events (see the store's events.go): per event a flag byte, the key and
// its length, and the nodes replay could not read back, which are inlined.
// Those are the Node of a put the same entry writes over again, the Prev of
// an implicit parent's removal, and, for a key the entry rewrote without an
// event (an ACL change, listed in silent), any event's Node and Prev.
func eventRecordBytes(events []Event, silent map[string]bool) int {
	// rewrittenLater reports whether an event after the i-th changes the
	// same key: a scan for the few events of most entries, a map for more.
	rewrittenLater := func(i int) bool {
		key := eventKey(&events[i])
		for j := i + 1; j < len(events); j++ {
			if bytes.Equal(eventKey(&events[j]), key) {
				return true
			}
		}
		return false
	}
	if len(events) > 8 {
		last := make(map[string]int, len(events))
		for i := range events {
			last[string(eventKey(&events[i]))] = i
		}
		rewrittenLater = func(i int) bool { return last[string(eventKey(&events[i]))] != i }
	}
	n := 32
	for i := range events {
		ev := &events[i]
		key := eventKey(ev)
		rewritten := silent[string(key)]
		n += 16 + len(key)
		if ev.Type == EventPut && (rewritten || rewrittenLater(i)) {
			n += nodeRecordBytes(ev.Node)
		}
		if (ev.Implicit && ev.Type == EventDelete) || rewritten {
			n += nodeRecordBytes(ev.Prev)
		}
	}
	return n
}

func eventKey(ev *Event) []byte {
	if ev.Node != nil {
		return ev.Node.Key
	}
	if ev.Prev != nil {
		return ev.Prev.Key
	}
	return nil
}
