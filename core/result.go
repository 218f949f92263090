package core

// Result is what applying one entry answers to its proposer.
type Result struct {
	// Rev is the store revision after the entry: the header revision of
	// the answer.
	Rev int64
	// Err is set when the op failed as a whole and changed nothing. For a
	// Txn whose op failed, FailedOp says which one (a path of indexes for
	// nested Txns is not kept: the index is within the branch that ran).
	Err      error
	FailedOp int

	// Txn results.
	Succeeded bool
	Ops       []OpResult

	// LeaseRevoke: the keys deleted.
	Deleted int64
}

// OpResult is the answer of one TxnOp.
type OpResult struct {
	Kind OpKind
	// Rev is the store revision as this op saw it (etcd puts it in the
	// op's response header).
	Rev int64

	// Range, Get: matching nodes (Range honours limit/keys-only).
	Nodes []*Node
	Count int64
	More  bool

	// Put, DeleteRange: previous nodes when asked for.
	Prev    []*Node
	Deleted int64

	// Create: the path actually created (with its sequential suffix).
	Path []byte
	// Create, SetData, SetACL, Check, Get: the node after the op, with its
	// Dir, for a ZooKeeper Stat.
	Node *Node
	Dir  *Dir

	// Txn
	Txn *Result
}
