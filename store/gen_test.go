package store

import (
	"fmt"
	"math/rand/v2"

	"github.com/januskv/janus/core"
)

// entryGen generates random but plausible core entries against a MemState
// that it is told about: etcd puts, deletes and ranges, transactions with
// compares (writing one key several times, which the event log must get
// right), ZooKeeper creates of every kind, deletes, setData, setACL, multis,
// lease grants and revokes, and compactions, valid and not.
type entryGen struct {
	rng   *rand.Rand
	mem   *core.MemState
	index uint64
	time  int64
}

var (
	etcdKeys  = []string{"a", "b", "c", "foo/1", "foo/2", "foo/3", "zz"}
	treePaths = []string{"/app", "/app/cfg", "/app/locks", "/app/locks/x", "/svc", "/svc/a", "/svc/a/b", "/svc/a/b/c", "/e", "/q"}
	seqBases  = []string{"/app/locks/lock-", "/q/item-", "/svc/a/n-"}
)

func newEntryGen(seed uint64, mem *core.MemState) *entryGen {
	return &entryGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), mem: mem, time: 1_700_000_000_000}
}

func (g *entryGen) pick(xs []string) []byte { return []byte(xs[g.rng.IntN(len(xs))]) }

func (g *entryGen) anyKey() []byte {
	if g.rng.IntN(2) == 0 {
		return g.pick(etcdKeys)
	}
	return g.pick(treePaths)
}

func (g *entryGen) value() []byte {
	v := make([]byte, g.rng.IntN(24))
	for i := range v {
		v[i] = byte('a' + g.rng.IntN(26))
	}
	return v
}

func (g *entryGen) leaseID() int64 { return 1 + g.rng.Int64N(6) }

// next returns the next entry.
func (g *entryGen) next() core.Entry {
	g.index++
	g.time += 1 + g.rng.Int64N(50)
	return core.Entry{Index: g.index, Time: g.time, Op: g.op()}
}

func (g *entryGen) op() core.Op {
	switch n := g.rng.IntN(100); {
	case n < 22:
		return txnOf(g.put())
	case n < 30:
		return txnOf(g.deleteRange())
	case n < 42:
		return core.Op{Txn: g.etcdTxn(0)}
	case n < 58:
		return txnOf(g.create())
	case n < 64:
		return txnOf(core.TxnOp{Kind: core.OpDelete, Key: g.pick(treePaths), ExpectedVersion: g.zkVersion()})
	case n < 70:
		return txnOf(core.TxnOp{Kind: core.OpSetData, Key: g.pick(treePaths), Value: g.value(), ExpectedVersion: g.zkVersion()})
	case n < 73:
		return txnOf(g.setACL())
	case n < 80:
		return core.Op{Txn: g.multi()}
	case n < 87:
		grant := &core.LeaseGrant{ID: g.leaseID(), TTL: 10 + g.rng.Int64N(50)}
		if g.rng.IntN(2) == 0 {
			grant.Session = &core.Session{TimeoutMs: 4000, Password: g.value()}
		}
		return core.Op{LeaseGrant: grant}
	case n < 92:
		return core.Op{LeaseRevoke: &core.LeaseRevoke{ID: g.leaseID()}}
	default:
		meta, _ := g.mem.Meta()
		// Mostly valid, sometimes already compacted or in the future.
		rev := meta.CompactRev + g.rng.Int64N(meta.Rev-meta.CompactRev+2)
		if g.rng.IntN(8) == 0 {
			rev = meta.CompactRev
		}
		return core.Op{Compact: &core.Compact{Rev: rev}}
	}
}

func txnOf(ops ...core.TxnOp) core.Op {
	return core.Op{Txn: &core.Txn{Success: ops}}
}

func (g *entryGen) zkVersion() int32 {
	if g.rng.IntN(3) == 0 {
		return int32(g.rng.IntN(3))
	}
	return -1
}

func (g *entryGen) put() core.TxnOp {
	op := core.TxnOp{Kind: core.OpPut, Key: g.anyKey(), Value: g.value(), PrevKV: g.rng.IntN(2) == 0}
	switch g.rng.IntN(6) {
	case 0:
		op.Lease = g.leaseID()
	case 1:
		op.IgnoreValue = true
	}
	return op
}

func (g *entryGen) deleteRange() core.TxnOp {
	op := core.TxnOp{Kind: core.OpDeleteRange, Key: g.anyKey(), PrevKV: g.rng.IntN(2) == 0}
	switch g.rng.IntN(5) {
	case 0:
		op.Key, op.End = []byte("a"), []byte("c")
	case 1:
		op.Key = g.pick(treePaths)
		op.End = prefixEnd(op.Key)
	case 2:
		op.Key, op.End = []byte("foo/"), []byte{0}
	}
	return op
}

func (g *entryGen) compare() core.Compare {
	c := core.Compare{Key: g.anyKey(), Target: core.CompareTarget(g.rng.IntN(5)), Result: core.CompareResult(g.rng.IntN(4))}
	if n, _ := g.mem.Node(c.Key); n != nil && g.rng.IntN(2) == 0 {
		c.Int, c.Value = n.Version, n.Value
		switch c.Target {
		case core.CompareCreateRev:
			c.Int = n.CreateRev
		case core.CompareModRev:
			c.Int = n.ModRev
		case core.CompareLease:
			c.Int = n.Lease
		}
	} else {
		c.Int, c.Value = g.rng.Int64N(4), g.value()
	}
	if g.rng.IntN(6) == 0 {
		c.End = []byte{0}
	}
	return c
}

func (g *entryGen) etcdTxn(depth int) *core.Txn {
	t := &core.Txn{}
	for range g.rng.IntN(3) {
		t.Compares = append(t.Compares, g.compare())
	}
	ops := func() []core.TxnOp {
		var ops []core.TxnOp
		for range g.rng.IntN(4) {
			switch g.rng.IntN(6) {
			case 0, 1:
				ops = append(ops, g.put())
			case 2:
				ops = append(ops, g.deleteRange())
			case 3:
				ops = append(ops, core.TxnOp{Kind: core.OpRange, Key: []byte("a"), End: []byte{0}})
			case 4:
				// The same key twice: the event log must keep both.
				p := g.put()
				ops = append(ops, p, core.TxnOp{Kind: core.OpPut, Key: p.Key, Value: g.value()})
				if g.rng.IntN(2) == 0 {
					ops = append(ops, core.TxnOp{Kind: core.OpDeleteRange, Key: p.Key})
				}
			case 5:
				if depth < 2 {
					ops = append(ops, core.TxnOp{Kind: core.OpTxn, Txn: g.etcdTxn(depth + 1)})
				}
			}
		}
		return ops
	}
	t.Success, t.Failure = ops(), ops()
	return t
}

func (g *entryGen) create() core.TxnOp {
	opts := &core.CreateOptions{Mode: core.ModePersistent}
	key := g.pick(treePaths)
	if g.rng.IntN(4) == 0 {
		key = g.pick(seqBases)
		opts.Sequential = true
	}
	switch g.rng.IntN(8) {
	case 0, 1:
		opts.Lease = g.leaseID()
	case 2:
		opts.Mode = core.ModeContainer
	case 3:
		opts.Mode, opts.TTL = core.ModeTTL, 1000
	}
	if g.rng.IntN(10) == 0 {
		opts.ACL = []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "world", ID: "anyone"}}}
	}
	return core.TxnOp{Kind: core.OpCreate, Key: key, Value: g.value(), Create: opts}
}

func (g *entryGen) setACL() core.TxnOp {
	return core.TxnOp{Kind: core.OpSetACL, Key: g.pick(treePaths), ExpectedVersion: -1,
		ACL: []core.ACL{{Perms: core.Perm(1 + g.rng.IntN(31)), ID: core.ID{Scheme: "world", ID: "anyone"}}}}
}

// multi is a ZooKeeper multi; several shapes touch one path more than once
// in one revision, some with an ACL change (a node write with no event).
func (g *entryGen) multi() *core.Txn {
	p := g.pick(treePaths)
	child := core.JoinPath(p, []byte(fmt.Sprintf("m%d", g.rng.IntN(3))))
	switch g.rng.IntN(5) {
	case 0:
		return &core.Txn{Success: []core.TxnOp{
			{Kind: core.OpCreate, Key: p, Value: g.value()},
			{Kind: core.OpSetData, Key: p, Value: g.value(), ExpectedVersion: -1},
		}}
	case 1:
		return &core.Txn{Success: []core.TxnOp{
			{Kind: core.OpCreate, Key: child, Value: g.value()},
			{Kind: core.OpDelete, Key: child, ExpectedVersion: -1},
		}}
	case 2:
		return &core.Txn{Success: []core.TxnOp{
			g.setACL(),
			{Kind: core.OpSetData, Key: p, Value: g.value(), ExpectedVersion: -1},
		}}
	case 3:
		return &core.Txn{Success: []core.TxnOp{
			{Kind: core.OpCheck, Key: p, ExpectedVersion: g.zkVersion()},
			{Kind: core.OpDelete, Key: child, ExpectedVersion: -1},
			{Kind: core.OpDelete, Key: p, ExpectedVersion: -1},
		}}
	default:
		return &core.Txn{Success: []core.TxnOp{
			{Kind: core.OpPut, Key: child, Value: g.value()},
			{Kind: core.OpDeleteRange, Key: p},
			{Kind: core.OpPut, Key: p, Value: g.value()},
		}}
	}
}
