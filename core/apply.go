package core

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// Apply applies one entry on top of ov and returns the proposer's answer and
// the entry's Batch. The result's Err is a deterministic refusal (nothing was
// written), which is also the answer to an op over a storage limit (see
// limits.go): what a client sent never makes Apply fail. A returned error
// means the state could not be read and the replica must stop rather than
// diverge.
func Apply(ov *Overlay, e *Entry) (*Result, *Batch, error) {
	meta, err := ov.Meta()
	if err != nil {
		return nil, nil, fmt.Errorf("core: read meta: %w", err)
	}
	a := &applier{ov: ov, entry: e, meta: meta, rev: meta.Rev + 1}
	var res *Result
	// The faces refuse ops over a storage limit before proposing them;
	// one in the log anyway is refused here alike on every member.
	refused := CheckOp(&e.Op)
	if refused == nil {
		// An op checked against an auth state that has changed since is
		// refused: a revoked permission never acts.
		refused = meta.AuthState().stale(e.Op.AuthCheck)
	}
	if refused == nil {
		// While NOSPACE is active only what shrinks the state runs.
		refused = CheckSpace(meta.Alarms, &e.Op)
	}
	switch op := e.Op; {
	case refused != nil:
		res = &Result{Err: refused}
	case op.Txn != nil:
		res, err = a.txn(op.Txn, nil)
	case op.LeaseGrant != nil:
		res, err = a.leaseGrant(op.LeaseGrant)
	case op.LeaseRevoke != nil:
		res, err = a.leaseRevoke(op.LeaseRevoke)
	case op.Compact != nil:
		res = a.compact(op.Compact)
	case op.HashCheck != nil, op.HashReport != nil:
		res = &Result{} // for the members to act on, not the state
	case op.Alarm != nil:
		res = a.alarm(op.Alarm)
	case op.Auth != nil:
		res = a.auth(op.Auth)
	default:
		res = &Result{Err: errCode(CodeBadArguments, nil)}
	}
	if err != nil {
		ov.Rollback()
		return nil, nil, err
	}
	if res.Err == nil {
		res = a.checkStored(res)
	}
	b := &Batch{Index: e.Index, Time: e.Time, Rev: meta.Rev, Origin: e.Op.Origin}
	if res.Err != nil {
		ov.Rollback()
		res.Rev = meta.Rev
		return res, b, nil
	}
	if a.changed {
		a.meta.Rev = a.rev
		b.Rev, b.Changed = a.rev, true
		b.Events, b.EventBytes = a.events, a.eventBytes
	}
	if a.changed || a.compactTo != 0 || a.metaChanged {
		ov.putMeta(a.meta)
	}
	b.Compact = a.compactTo
	ov.commit(b)
	res.Rev = b.Rev
	return res, b, nil
}

// auth applies an auth management request. It changes Meta only: no
// revision, no event.
func (a *applier) auth(c *AuthChange) *Result {
	next, changed, refused := authChange(a.meta.AuthState(), c)
	if refused != nil {
		return &Result{Err: refused}
	}
	if changed {
		a.meta.Auth = next
		a.metaChanged = true
	}
	return &Result{}
}

// applier carries the state of applying one entry.
type applier struct {
	ov    *Overlay
	entry *Entry
	meta  Meta
	// rev is the revision this entry's writes carry; it becomes the store
	// revision only if something is written (changed).
	rev       int64
	changed   bool
	events    []Event
	compactTo int64
	// metaChanged: the entry changed Meta without writing a node (alarms).
	metaChanged bool
	// The branch each Txn of the entry takes, decided before any op runs:
	// the outermost Txn's in top and topOK, nested ones' in branches (made
	// only for an entry that has any).
	top      *Txn
	topOK    bool
	branches map[*Txn]bool
	// tooLarge is set when a node the entry writes would not fit a
	// stored record; silent holds the keys it rewrote without an event
	// (ACL changes). checkStored reads both.
	tooLarge   bool
	silent     map[string]bool
	eventBytes int
}

// checkStored refuses, after the fact, an entry whose writes the store
// could not keep: a node record or the revision's event record over
// MaxRecordBytes. Apply rolls the entry back, as for any refusal.
func (a *applier) checkStored(res *Result) *Result {
	if a.changed {
		a.eventBytes = eventRecordBytes(a.events, a.silent)
	}
	if a.tooLarge || a.eventBytes > MaxRecordBytes {
		return &Result{Err: errCode(CodeTooLarge, nil)}
	}
	return res
}

// putNode stores n, noting a record too large to keep.
func (a *applier) putNode(n *Node) {
	if nodeRecordBytes(n) > MaxRecordBytes {
		a.tooLarge = true
	}
	a.ov.putNode(n.Key, n)
}

func (a *applier) setBranch(t *Txn, ok bool) {
	if a.top == nil {
		a.top, a.topOK = t, ok
		return
	}
	if a.branches == nil {
		a.branches = map[*Txn]bool{}
	}
	a.branches[t] = ok
}

func (a *applier) branch(t *Txn) bool {
	if t == a.top {
		return a.topOK
	}
	return a.branches[t]
}

func (a *applier) seenRev() int64 {
	if a.changed {
		return a.rev
	}
	return a.meta.Rev
}

// txn runs t. A nested Txn without an Auth of its own acts with the
// identity of the Txn around it (inherited): nesting never sheds an ACL
// check.
func (a *applier) txn(t *Txn, inherited []ID) (*Result, error) {
	auth := t.Auth
	if auth == nil {
		auth = inherited
	}
	if a.top == nil {
		// etcd decides the branch of every nested Txn from the state
		// before the outer Txn runs any op: nested compares do not see
		// the writes of the ops before them.
		if err := a.decide(t); err != nil {
			return nil, err
		}
		if err := a.precheck(t); IsRefusal(err) {
			return &Result{Err: err}, nil
		} else if err != nil {
			return nil, err
		}
	}
	ok := a.branch(t)
	ops := t.Success
	if !ok {
		ops = t.Failure
	}
	res := &Result{Succeeded: ok, Ops: make([]OpResult, 0, len(ops))}
	for i := range ops {
		r, err := a.op(&ops[i], auth)
		if IsRefusal(err) {
			res.Err, res.FailedOp = err, i
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		r.Rev = a.seenRev()
		res.Ops = append(res.Ops, r)
	}
	return res, nil
}

// op runs one op of a Txn. Its error is a refusal (IsRefusal: nothing of
// the entry is written) or a failure to read the state.
func (a *applier) op(op *TxnOp, auth []ID) (OpResult, error) {
	switch op.Kind {
	case OpRange:
		opts := RangeOptions{}
		if op.Range != nil {
			opts = *op.Range
		}
		if opts.Rev != 0 {
			// precheck has found the revision readable; its data is
			// history, which the member answering the client reads from
			// a View at that revision (see RangeOptions.Rev).
			return OpResult{Kind: OpRange}, nil
		}
		if err := CheckRangeACL(a.ov, op.Key, op.End, auth); err != nil {
			return OpResult{}, err
		}
		return DoRange(a.ov, op.Key, op.End, opts)
	case OpPut:
		return a.put(op, auth)
	case OpDeleteRange:
		return a.deleteRange(op, auth)
	case OpTxn:
		if op.Txn == nil {
			return OpResult{}, errCode(CodeBadArguments, nil)
		}
		sub, err := a.txn(op.Txn, auth)
		if err != nil {
			return OpResult{}, err
		}
		if sub.Err != nil {
			return OpResult{}, sub.Err
		}
		sub.Rev = a.seenRev()
		return OpResult{Kind: OpTxn, Txn: sub}, nil
	case OpCreate:
		return a.create(op, auth)
	case OpDelete:
		return a.zkDelete(op, auth)
	case OpSetData:
		return a.setData(op, auth)
	case OpCheck:
		return a.check(op, auth)
	case OpSetACL:
		return a.setACL(op, auth)
	case OpGet:
		n, d, err := a.zkTarget(op.Key, PermRead, auth)
		if err != nil {
			return OpResult{}, err
		}
		return OpResult{Kind: OpGet, Node: n, Dir: d}, nil
	}
	return OpResult{}, errCode(CodeBadArguments, nil)
}

// decide evaluates the compares of t and of the nested Txns in the branch
// that will run, recording each Txn's branch.
func (a *applier) decide(t *Txn) error {
	ok, err := a.compares(t.Compares)
	if err != nil {
		return err
	}
	a.setBranch(t, ok)
	ops := t.Success
	if !ok {
		ops = t.Failure
	}
	for i := range ops {
		if ops[i].Kind == OpTxn && ops[i].Txn != nil {
			if err := a.decide(ops[i].Txn); err != nil {
				return err
			}
		}
	}
	return nil
}

// precheck refuses, before any op of the outermost Txn t runs, what etcd
// refuses before running a Txn (its checkTxn): walking the branches that
// will run, in order, a range at a revision in the future or below the
// compaction point, a put of a lease that does not exist, and a put that
// keeps the value or lease of a key that does not exist. All of it is read
// from the state before the Txn, so a refused Txn changes nothing. The
// error is a refusal (IsRefusal) or a failure to read the state.
func (a *applier) precheck(t *Txn) error {
	ops := t.Success
	if !a.branch(t) {
		ops = t.Failure
	}
	for i := range ops {
		op := &ops[i]
		var err error
		switch op.Kind {
		case OpRange:
			if op.Range != nil {
				err = checkRangeRev(a.meta, op.Range.Rev)
			}
		case OpPut:
			err = a.checkPut(op)
		case OpTxn:
			if op.Txn != nil {
				err = a.precheck(op.Txn)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkRangeRev refuses a read at a revision the state m cannot show.
func checkRangeRev(m Meta, rev int64) error {
	switch {
	case rev == 0:
		return nil
	case rev > m.Rev:
		return ErrFutureRev
	case rev < m.CompactRev:
		return ErrCompacted
	}
	return nil
}

func (a *applier) checkPut(op *TxnOp) error {
	if op.Lease != 0 {
		le, err := a.ov.Lease(op.Lease)
		if err != nil {
			return err
		}
		if le == nil {
			return errCode(CodeLeaseNotFound, op.Key)
		}
	}
	if op.IgnoreValue || op.IgnoreLease {
		n, err := a.ov.Node(op.Key)
		if err != nil {
			return err
		}
		if n == nil {
			return errCode(CodeKeyNotFound, op.Key)
		}
	}
	return nil
}

// compares evaluates etcd compares in order; all must hold.
func (a *applier) compares(cs []Compare) (bool, error) {
	for i := range cs {
		ok, err := evalCompare(a.ov, &cs[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func evalCompare(v View, c *Compare) (bool, error) {
	var nodes []*Node
	if err := rangeNodes(v, c.Key, c.End, func(n *Node) bool { nodes = append(nodes, n); return true }); err != nil {
		return false, err
	}
	if len(nodes) == 0 {
		if c.Target == CompareValue {
			return false, nil
		}
		return compareNode(c, &Node{}), nil
	}
	for _, n := range nodes {
		if !compareNode(c, n) {
			return false, nil
		}
	}
	return true, nil
}

func compareNode(c *Compare, n *Node) bool {
	var r int
	switch c.Target {
	case CompareValue:
		r = bytes.Compare(n.Value, c.Value)
	case CompareVersion:
		r = cmp.Compare(n.Version, c.Int)
	case CompareCreateRev:
		r = cmp.Compare(n.CreateRev, c.Int)
	case CompareModRev:
		r = cmp.Compare(n.ModRev, c.Int)
	case CompareLease:
		r = cmp.Compare(n.Lease, c.Int)
	}
	switch c.Result {
	case CompareEqual:
		return r == 0
	case CompareNotEqual:
		return r != 0
	case CompareGreater:
		return r > 0
	case CompareLess:
		return r < 0
	}
	return false
}

// rangeNodes visits the stored nodes an etcd key/range_end pair names: just
// key when end is empty, every key >= key when end is "\x00", else
// [key, end).
func rangeNodes(v View, key, end []byte, fn func(*Node) bool) error {
	if len(end) == 0 {
		n, err := v.Node(key)
		if err != nil || n == nil {
			return err
		}
		fn(n)
		return nil
	}
	if len(end) == 1 && end[0] == 0 {
		return v.Range(key, nil, fn)
	}
	if bytes.Compare(end, key) <= 0 {
		return nil
	}
	return v.Range(key, end, fn)
}

func (a *applier) put(op *TxnOp, auth []ID) (OpResult, error) {
	prev, err := a.ov.Node(op.Key)
	if err != nil {
		return OpResult{}, err
	}
	if err := a.etcdWriteACL(op.Key, prev, auth); err != nil {
		return OpResult{}, err
	}
	if (op.IgnoreValue || op.IgnoreLease) && prev == nil {
		return OpResult{}, errCode(CodeKeyNotFound, op.Key)
	}
	value, lease := op.Value, op.Lease
	if op.IgnoreValue {
		value = prev.Value
	}
	if op.IgnoreLease {
		lease = prev.Lease
	}
	if lease != 0 {
		le, err := a.ov.Lease(lease)
		if err != nil {
			return OpResult{}, err
		}
		if le == nil {
			return OpResult{}, errCode(CodeLeaseNotFound, op.Key)
		}
	}
	var n *Node
	if prev != nil {
		n = prev.Clone()
		n.Version++
	} else {
		n = &Node{Key: bytes.Clone(op.Key), CreateRev: a.rev, Version: 1, Ctime: a.entry.Time}
	}
	n.Value = bytes.Clone(value)
	if n.Value == nil {
		n.Value = []byte{}
	}
	n.ModRev, n.Mtime, n.Lease = a.rev, a.entry.Time, lease
	if err := a.writeNode(prev, n); err != nil {
		return OpResult{}, err
	}
	r := OpResult{Kind: OpPut}
	if op.PrevKV && prev != nil {
		r.Prev = []*Node{prev}
	}
	return r, nil
}

// writeNode stores n over prev (nil if new), keeping the lease index, the
// tree and the event stream in step.
func (a *applier) writeNode(prev, n *Node) error {
	wasImplicit := false
	if prev == nil && IsTreePath(n.Key) && string(n.Key) != RootPath {
		// An implicit node becoming a stored one is already in the tree.
		// A system node was visible too, but is linked into its parent's
		// child index only while stored (system.go).
		d, err := a.ov.Dir(n.Key)
		if err != nil {
			return err
		}
		system := IsSystemPath(n.Key)
		wasImplicit = system || d != nil && d.NumChildren > 0
		if system || !wasImplicit {
			if err := a.treeAdd(n.Key); err != nil {
				return err
			}
		}
	}
	a.storeNode(prev, n, wasImplicit)
	return nil
}

// storeNode writes n over prev (nil: none), whose tree links are done,
// with its lease attachment and its event.
func (a *applier) storeNode(prev, n *Node, wasImplicit bool) {
	a.changed = true
	if prev == nil || prev.Lease != n.Lease {
		if prev != nil && prev.Lease != 0 {
			a.ov.putLeaseKey(prev.Lease, n.Key, false)
		}
		if n.Lease != 0 {
			a.ov.putLeaseKey(n.Lease, n.Key, true)
		}
	}
	a.putNode(n)
	a.events = append(a.events, Event{Type: EventPut, Node: n, Prev: prev, WasImplicit: wasImplicit})
}

// removeNode deletes the stored node prev.
func (a *applier) removeNode(prev *Node) error {
	a.changed = true
	key := prev.Key
	if prev.Lease != 0 {
		a.ov.putLeaseKey(prev.Lease, key, false)
	}
	a.ov.putNode(key, nil)
	a.events = append(a.events, Event{Type: EventDelete, Node: &Node{Key: key, ModRev: a.rev}, Prev: prev})
	if !IsTreePath(key) || string(key) == RootPath {
		return nil
	}
	if IsSystemPath(key) {
		// It stays in the tree, with its children, unlinked from its
		// parent as system nodes are while not stored (system.go).
		return a.treeRemove(key)
	}
	d, err := a.ov.Dir(key)
	if err != nil {
		return err
	}
	if d != nil && d.NumChildren > 0 {
		// Children keep it in the tree as an implicit parent.
		nd := *d
		nd.ImplicitRev, nd.ImplicitTime = a.rev, a.entry.Time
		a.ov.putDir(key, &nd)
		a.events = append(a.events, Event{Type: EventPut, Node: implicitNode(key, &nd), Implicit: true})
		return nil
	}
	if d != nil {
		a.ov.putDir(key, nil)
	}
	return a.treeRemove(key)
}

// treeAdd links a path that just became visible into its parent, making the
// parent an implicit node (recursively) if it was not visible.
func (a *applier) treeAdd(path []byte) error {
	parent, _ := ParentPath(path)
	d, err := a.ov.Dir(parent)
	if err != nil {
		return err
	}
	var nd Dir
	if d != nil {
		nd = *d
	}
	visible := string(parent) == RootPath || IsSystemPath(parent) || nd.NumChildren > 0
	if !visible {
		pn, err := a.ov.Node(parent)
		if err != nil {
			return err
		}
		visible = pn != nil
	}
	nd.NumChildren++
	nd.Cversion++
	nd.Pzxid = a.rev
	nd.Seq++
	if !visible {
		nd.ImplicitRev, nd.ImplicitTime = a.rev, a.entry.Time
		if err := a.treeAdd(parent); err != nil {
			return err
		}
		a.events = append(a.events, Event{Type: EventPut, Node: implicitNode(parent, &nd), Implicit: true})
	}
	a.ov.putDir(parent, &nd)
	a.ov.putChild(parent, BaseName(path), true)
	return nil
}

// treeRemove unlinks a path that stopped being visible from its parent,
// removing implicit parents left without children.
func (a *applier) treeRemove(path []byte) error {
	parent, _ := ParentPath(path)
	d, err := a.ov.Dir(parent)
	if err != nil {
		return err
	}
	if d == nil {
		return fmt.Errorf("core: tree index broken: %q has no dir record for child %q", parent, path)
	}
	nd := *d
	nd.NumChildren--
	nd.Cversion++
	nd.Pzxid = a.rev
	a.ov.putChild(parent, BaseName(path), false)
	if nd.NumChildren == 0 && string(parent) != RootPath && !IsSystemPath(parent) {
		pn, err := a.ov.Node(parent)
		if err != nil {
			return err
		}
		if pn == nil {
			a.ov.putDir(parent, nil)
			a.events = append(a.events, Event{Type: EventDelete, Node: &Node{Key: bytes.Clone(parent), ModRev: a.rev}, Prev: implicitNode(parent, d), Implicit: true})
			return a.treeRemove(parent)
		}
	}
	a.ov.putDir(parent, &nd)
	return nil
}

func (a *applier) deleteRange(op *TxnOp, auth []ID) (OpResult, error) {
	var victims []*Node
	if err := rangeNodes(a.ov, op.Key, op.End, func(n *Node) bool { victims = append(victims, n); return true }); err != nil {
		return OpResult{}, err
	}
	for _, n := range victims {
		// As ZooKeeper's delete: the parent's ACL must allow it.
		if err := a.parentACL(n.Key, PermDelete, auth); err != nil {
			return OpResult{}, err
		}
	}
	r := OpResult{Kind: OpDeleteRange, Deleted: int64(len(victims))}
	for _, n := range victims {
		if err := a.removeNode(n); err != nil {
			return OpResult{}, err
		}
	}
	if op.PrevKV {
		r.Prev = victims
	}
	return r, nil
}

// etcdWriteACL checks an etcd put against ZooKeeper's ACLs, for an etcd
// request that carries an identity (auth enabled, see Txn.Auth): a put
// over a node needs its WRITE permission (ZooKeeper's setData), a put that
// creates a tree node the parent's CREATE permission.
func (a *applier) etcdWriteACL(key []byte, prev *Node, auth []ID) error {
	if auth == nil {
		return nil
	}
	if prev != nil {
		if !CheckACL(prev.ACL, PermWrite, auth) {
			return errCode(CodeNoAuth, key)
		}
		return nil
	}
	return a.parentACL(key, PermCreate, auth)
}

// parentACL checks perm on the parent of a tree path; keys that are not
// tree paths have no parent and no ACL.
func (a *applier) parentACL(key []byte, perm Perm, auth []ID) error {
	if auth == nil || !IsTreePath(key) {
		return nil
	}
	parentPath, ok := ParentPath(key)
	if !ok {
		return nil
	}
	parent, _, err := TreeNode(a.ov, parentPath)
	if err != nil || parent == nil {
		return err
	}
	if !CheckACL(parent.ACL, perm, auth) {
		return errCode(CodeNoAuth, key)
	}
	return nil
}

// CheckRangeACL refuses (CodeNoAuth, naming the first such key) a read of
// [key, end) by auth when a node in it has a ZooKeeper ACL denying auth
// READ. A nil auth reads everything (etcd with auth off, or root). An
// error that is not a refusal (IsRefusal) is a failure to read v.
func CheckRangeACL(v View, key, end []byte, auth []ID) error {
	if auth == nil {
		return nil
	}
	var refused error
	if err := rangeNodes(v, key, end, func(n *Node) bool {
		if !CheckACL(n.ACL, PermRead, auth) {
			refused = errCode(CodeNoAuth, n.Key)
			return false
		}
		return true
	}); err != nil {
		return err
	}
	return refused
}

// zkTarget is ZKTarget on the entry's state, under the auth state the
// entry applies in.
func (a *applier) zkTarget(key []byte, perm Perm, auth []ID) (*Node, *Dir, error) {
	return ZKTarget(a.ov, a.meta.AuthState(), key, perm, auth)
}

// zkVersionOK reports whether a ZooKeeper expected version (-1: any) matches.
func zkVersionOK(expected int32, actual int32) bool {
	return expected == -1 || expected == actual
}

func zkVersion(n *Node) int32 {
	if n.Implicit {
		return 0
	}
	return int32(n.Version - 1)
}

func (a *applier) create(op *TxnOp, auth []ID) (OpResult, error) {
	opts := op.Create
	if opts == nil {
		opts = &CreateOptions{}
	}
	// A sequential create may name a directory ("/q/"): what must be a
	// valid path is the name with its suffix.
	checked := op.Key
	if opts.Sequential {
		checked = append(bytes.Clone(op.Key), "0000000000"...)
	}
	if !IsTreePath(checked) {
		return OpResult{}, errCode(CodeBadArguments, op.Key)
	}
	parentPath, ok := ParentPath(checked)
	if !ok {
		return OpResult{}, errCode(CodeNodeExists, op.Key)
	}
	parent, pdir, err := TreeNode(a.ov, parentPath)
	if err != nil {
		return OpResult{}, err
	}
	if parent == nil {
		return OpResult{}, errCode(CodeNoNode, parentPath)
	}
	if !ZKAllowed(a.meta.AuthState(), parent.ACL, checked, PermCreate, auth) {
		return OpResult{}, errCode(CodeNoAuth, parentPath)
	}
	path := op.Key
	if opts.Sequential {
		var seq int32
		if pdir != nil {
			seq = pdir.Seq
		}
		path = AppendSequentialSuffix(bytes.Clone(op.Key), seq)
	}
	exists, err := inTree(a.ov, path)
	if err != nil {
		return OpResult{}, err
	}
	if exists {
		return OpResult{}, errCode(CodeNodeExists, path)
	}
	if parent.Lease != 0 && parent.Mode == ModePersistent {
		return OpResult{}, errCode(CodeNoChildrenForEphemerals, parentPath)
	}
	if opts.Lease != 0 {
		le, err := a.ov.Lease(opts.Lease)
		if err != nil {
			return OpResult{}, err
		}
		if le == nil {
			return OpResult{}, errCode(CodeSessionExpired, path)
		}
	}
	if opts.ACL != nil && len(opts.ACL) == 0 {
		return OpResult{}, errCode(CodeInvalidACL, path)
	}
	n := &Node{
		Key: path, Value: bytes.Clone(op.Value), CreateRev: a.rev, ModRev: a.rev, Version: 1,
		Lease: opts.Lease, Ctime: a.entry.Time, Mtime: a.entry.Time, Mode: opts.Mode, TTL: opts.TTL,
		ACL: cloneACL(opts.ACL),
	}
	if n.Value == nil {
		n.Value = []byte{}
	}
	// Not in the tree, so neither implicit (no children) nor a system
	// node: linking it is all writeNode would do before storing it.
	if err := a.treeAdd(path); err != nil {
		return OpResult{}, err
	}
	a.storeNode(nil, n, false)
	return OpResult{Kind: OpCreate, Path: path, Node: n}, nil
}

func cloneACL(acl []ACL) []ACL {
	if acl == nil {
		return nil
	}
	return append([]ACL{}, acl...)
}

func (a *applier) zkDelete(op *TxnOp, auth []ID) (OpResult, error) {
	parentPath, ok := ParentPath(op.Key)
	if !ok {
		return OpResult{}, errCode(CodeBadArguments, op.Key)
	}
	parent, _, err := TreeNode(a.ov, parentPath)
	if err != nil {
		return OpResult{}, err
	}
	if parent == nil {
		return OpResult{}, errCode(CodeNoNode, op.Key)
	}
	if !ZKAllowed(a.meta.AuthState(), parent.ACL, op.Key, PermDelete, auth) {
		return OpResult{}, errCode(CodeNoAuth, op.Key)
	}
	n, d, err := TreeNode(a.ov, op.Key)
	if err != nil {
		return OpResult{}, err
	}
	if n == nil {
		return OpResult{}, errCode(CodeNoNode, op.Key)
	}
	if !zkVersionOK(op.ExpectedVersion, zkVersion(n)) {
		return OpResult{}, errCode(CodeBadVersion, op.Key)
	}
	if d != nil && d.NumChildren > 0 {
		return OpResult{}, errCode(CodeNotEmpty, op.Key)
	}
	if err := a.removeNode(n); err != nil {
		return OpResult{}, err
	}
	return OpResult{Kind: OpDelete, Deleted: 1}, nil
}

func (a *applier) setData(op *TxnOp, auth []ID) (OpResult, error) {
	n, d, err := a.zkTarget(op.Key, PermWrite, auth)
	if err != nil {
		return OpResult{}, err
	}
	if !zkVersionOK(op.ExpectedVersion, zkVersion(n)) {
		return OpResult{}, errCode(CodeBadVersion, op.Key)
	}
	var prev *Node
	nn := n.Clone()
	if n.Implicit {
		// Writing data to an implicit parent makes it a stored node.
		nn.Implicit, nn.Version = false, 1
	} else {
		prev = n
	}
	nn.Value = bytes.Clone(op.Value)
	if nn.Value == nil {
		nn.Value = []byte{}
	}
	nn.Version++
	nn.ModRev, nn.Mtime = a.rev, a.entry.Time
	if err := a.writeNode(prev, nn); err != nil {
		return OpResult{}, err
	}
	return OpResult{Kind: OpSetData, Node: nn, Dir: d}, nil
}

func (a *applier) check(op *TxnOp, auth []ID) (OpResult, error) {
	n, d, err := a.zkTarget(op.Key, PermRead, auth)
	if err != nil {
		return OpResult{}, err
	}
	if !zkVersionOK(op.ExpectedVersion, zkVersion(n)) {
		return OpResult{}, errCode(CodeBadVersion, op.Key)
	}
	return OpResult{Kind: OpCheck, Node: n, Dir: d}, nil
}

func (a *applier) setACL(op *TxnOp, auth []ID) (OpResult, error) {
	n, d, err := a.zkTarget(op.Key, PermAdmin, auth)
	if err != nil {
		return OpResult{}, err
	}
	if op.ExpectedVersion != -1 && op.ExpectedVersion != n.Aversion {
		return OpResult{}, errCode(CodeBadVersion, op.Key)
	}
	if len(op.ACL) == 0 {
		return OpResult{}, errCode(CodeInvalidACL, op.Key)
	}
	nn := n.Clone()
	var prev *Node
	if n.Implicit {
		nn.Implicit, nn.Version, nn.Value = false, 1, []byte{}
	} else {
		prev = n
	}
	nn.ACL = cloneACL(op.ACL)
	nn.Aversion++
	// An ACL change is not a data change: etcd's mod_revision stays, but
	// the node record is rewritten at this revision.
	a.changed = true
	if prev == nil {
		if err := a.writeNode(nil, nn); err != nil {
			return OpResult{}, err
		}
	} else {
		// No event: the next event on the key carries this node as
		// its Prev, which the store must then keep inline.
		a.putNode(nn)
		if a.silent == nil {
			a.silent = map[string]bool{}
		}
		a.silent[string(nn.Key)] = true
	}
	return OpResult{Kind: OpSetACL, Node: nn, Dir: d}, nil
}

func (a *applier) leaseGrant(g *LeaseGrant) (*Result, error) {
	if g.ID <= 0 {
		return &Result{Err: errCode(CodeBadArguments, nil)}, nil
	}
	le, err := a.ov.Lease(g.ID)
	if err != nil {
		return nil, err
	}
	if le != nil {
		return &Result{Err: errCode(CodeLeaseExists, nil)}, nil
	}
	nl := &Lease{ID: g.ID, TTL: g.TTL}
	if g.Session != nil {
		s := *g.Session
		s.Password = bytes.Clone(s.Password)
		nl.Session = &s
	}
	a.ov.putLease(g.ID, nl)
	return &Result{}, nil
}

func (a *applier) leaseRevoke(r *LeaseRevoke) (*Result, error) {
	le, err := a.ov.Lease(r.ID)
	if err != nil {
		return nil, err
	}
	if le == nil {
		return &Result{Err: errCode(CodeLeaseNotFound, nil)}, nil
	}
	var keys [][]byte
	if err := a.ov.LeaseKeys(r.ID, func(k []byte) bool { keys = append(keys, bytes.Clone(k)); return true }); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, k := range keys {
		n, err := a.ov.Node(k)
		if err != nil {
			return nil, err
		}
		if n == nil || n.Lease != r.ID {
			return nil, fmt.Errorf("core: lease index broken: lease %d lists %q", r.ID, k)
		}
		if err := a.removeNode(n); err != nil {
			return nil, err
		}
		res.Deleted++
	}
	a.ov.putLease(r.ID, nil)
	return res, nil
}

func (a *applier) compact(c *Compact) *Result {
	if c.Rev > a.meta.Rev {
		return &Result{Err: ErrFutureRev}
	}
	// As etcd, whose compaction point starts at -1: compacting to 0 is
	// accepted once, on a store never compacted.
	if c.Rev < 0 || c.Rev <= a.meta.CompactRev && a.meta.Compacted {
		return &Result{Err: ErrCompacted}
	}
	a.meta.CompactRev, a.meta.Compacted = c.Rev, true
	a.compactTo = c.Rev
	a.metaChanged = true
	return &Result{}
}

// alarm raises or clears one alarm in Meta.Alarms.
func (a *applier) alarm(c *AlarmChange) *Result {
	if c.Alarm.Type != AlarmNoSpace && c.Alarm.Type != AlarmCorrupt {
		return &Result{Err: errCode(CodeBadArguments, nil)}
	}
	if alarms, changed := ChangeAlarms(a.meta.Alarms, c); changed {
		a.meta.Alarms = alarms
		a.metaChanged = true
	}
	return &Result{}
}

// ChangeAlarms returns alarms (ordered by member then type) after c, and
// whether c changed them; alarms itself is left as it was. Raising an
// active alarm or clearing an inactive one changes nothing.
func ChangeAlarms(alarms []Alarm, c *AlarmChange) ([]Alarm, bool) {
	i, found := slices.BinarySearchFunc(alarms, c.Alarm, compareAlarms)
	if found == c.Activate {
		return alarms, false
	}
	next := slices.Clone(alarms)
	if c.Activate {
		next = slices.Insert(next, i, c.Alarm)
	} else {
		next = slices.Delete(next, i, i+1)
	}
	if len(next) == 0 {
		next = nil
	}
	return next, true
}

func compareAlarms(x, y Alarm) int {
	if c := cmp.Compare(x.Member, y.Member); c != 0 {
		return c
	}
	return cmp.Compare(x.Type, y.Type)
}
