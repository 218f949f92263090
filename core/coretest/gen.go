// Package coretest generates seeded, realistic sequences of core entries for
// determinism, differential and metamorphic tests of the state machine and
// of everything that stores or replicates its log.
package coretest

import (
	"fmt"
	"math/rand/v2"

	"github.com/januskv/janus/core"
)

// Generator produces random entries over a small key space so that
// operations collide: creates hit existing nodes, compares both hold and
// fail, leases own keys that later get revoked.
type Generator struct {
	rng    *rand.Rand
	index  uint64
	time   int64
	leases []int64
	nextID int64
	rev    int64 // a guess at the current revision, for compactions
}

// NewGenerator returns a Generator whose output depends only on seed.
func NewGenerator(seed uint64) *Generator {
	return &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), time: 1_700_000_000_000, nextID: 1000}
}

// Entries returns the next n entries.
func (g *Generator) Entries(n int) []core.Entry {
	out := make([]core.Entry, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

var etcdKeys = []string{"a", "b", "c", "foo", "foo/bar", "zz", "/x", "/x/y", "/x/y/z", "/q", "/e/1", "/e/2/3"}
var zkParents = []string{"/", "/x", "/x/y", "/q", "/e", "/lock"}

func (g *Generator) pick(s []string) string { return s[g.rng.IntN(len(s))] }

func (g *Generator) key() []byte {
	if g.rng.IntN(3) == 0 {
		return []byte(g.pick(zkParents))
	}
	return []byte(g.pick(etcdKeys))
}

func (g *Generator) value() []byte {
	v := make([]byte, g.rng.IntN(24))
	for i := range v {
		v[i] = byte('a' + g.rng.IntN(26))
	}
	return v
}

func (g *Generator) lease() int64 {
	if len(g.leases) == 0 || g.rng.IntN(4) != 0 {
		return 0
	}
	return g.leases[g.rng.IntN(len(g.leases))]
}

func (g *Generator) zkPath() []byte {
	parent := g.pick(zkParents)
	name := fmt.Sprintf("n%d", g.rng.IntN(4))
	return core.JoinPath([]byte(parent), []byte(name))
}

// Next returns one entry.
func (g *Generator) Next() core.Entry {
	g.index++
	g.time += int64(g.rng.IntN(50))
	e := core.Entry{Index: g.index, Time: g.time}
	switch r := g.rng.IntN(100); {
	case r < 5:
		g.nextID += int64(1 + g.rng.IntN(3))
		id := g.nextID
		if g.rng.IntN(10) == 0 && len(g.leases) > 0 {
			id = g.leases[0] // a duplicate grant, refused
		}
		g.leases = append(g.leases, id)
		var sess *core.Session
		if g.rng.IntN(2) == 0 {
			sess = &core.Session{TimeoutMs: 10000, Password: g.value()}
		}
		e.Op.LeaseGrant = &core.LeaseGrant{ID: id, TTL: int64(2 + g.rng.IntN(60)), Session: sess}
	case r < 9 && len(g.leases) > 0:
		i := g.rng.IntN(len(g.leases))
		e.Op.LeaseRevoke = &core.LeaseRevoke{ID: g.leases[i]}
		if g.rng.IntN(3) != 0 {
			g.leases = append(g.leases[:i], g.leases[i+1:]...)
		}
	case r < 11:
		g.rev += 3
		e.Op.Compact = &core.Compact{Rev: g.rng.Int64N(g.rev+2) + 1}
	default:
		g.rev++
		e.Op.Txn = g.txn(0)
	}
	// Every origin in turn, without drawing from rng, so that a seed gives
	// the ops it gave before origins existed.
	e.Op.Origin = core.Origin(g.index % 4)
	return e
}

func (g *Generator) txn(depth int) *core.Txn {
	t := &core.Txn{}
	zk := g.rng.IntN(2) == 0
	if zk {
		t.Auth = []core.ID{{Scheme: "ip", ID: "127.0.0.1"}}
		if g.rng.IntN(3) == 0 {
			t.Auth = append(t.Auth, core.ID{Scheme: "digest", ID: "alice:x"})
		}
	}
	if !zk || g.rng.IntN(4) == 0 {
		for range g.rng.IntN(3) {
			c := core.Compare{Key: g.key(), Target: core.CompareTarget(g.rng.IntN(5)), Result: core.CompareResult(g.rng.IntN(4)), Int: g.rng.Int64N(5)}
			if c.Target == core.CompareValue {
				c.Value = g.value()
			}
			if g.rng.IntN(5) == 0 {
				c.End = []byte("zzzz")
			}
			t.Compares = append(t.Compares, c)
		}
	}
	nops := 1 + g.rng.IntN(3)
	for range nops {
		t.Success = append(t.Success, g.op(zk, depth))
	}
	if g.rng.IntN(2) == 0 {
		t.Failure = append(t.Failure, g.op(zk, depth))
	}
	return t
}

func (g *Generator) op(zk bool, depth int) core.TxnOp {
	if zk {
		return g.zkOp()
	}
	switch r := g.rng.IntN(10); {
	case r < 5:
		return core.TxnOp{Kind: core.OpPut, Key: g.key(), Value: g.value(), Lease: g.lease(), PrevKV: g.rng.IntN(2) == 0,
			IgnoreValue: g.rng.IntN(15) == 0, IgnoreLease: g.rng.IntN(15) == 0}
	case r < 7:
		op := core.TxnOp{Kind: core.OpDeleteRange, Key: g.key(), PrevKV: g.rng.IntN(2) == 0}
		if g.rng.IntN(3) == 0 {
			op.End = []byte(g.pick(etcdKeys))
		}
		return op
	case r < 9:
		return core.TxnOp{Kind: core.OpRange, Key: []byte("/"), End: []byte{0}, Range: &core.RangeOptions{Limit: g.rng.Int64N(4)}}
	default:
		if depth < 2 {
			return core.TxnOp{Kind: core.OpTxn, Txn: g.txn(depth + 1)}
		}
		return core.TxnOp{Kind: core.OpPut, Key: g.key(), Value: g.value()}
	}
}

func (g *Generator) zkOp() core.TxnOp {
	version := int32(-1)
	if g.rng.IntN(3) == 0 {
		version = int32(g.rng.IntN(3))
	}
	switch r := g.rng.IntN(10); {
	case r < 4:
		opts := &core.CreateOptions{Sequential: g.rng.IntN(4) == 0}
		switch g.rng.IntN(6) {
		case 0:
			opts.Lease = g.lease()
		case 1:
			opts.Mode = core.ModeContainer
		case 2:
			opts.Mode, opts.TTL = core.ModeTTL, 5000
		}
		if g.rng.IntN(5) == 0 {
			opts.ACL = []core.ACL{{Perms: core.PermRead | core.PermCreate, ID: core.ID{Scheme: "digest", ID: "alice:x"}}}
		}
		path := g.zkPath()
		if g.rng.IntN(4) == 0 {
			path = []byte(g.pick(zkParents[1:]))
		}
		return core.TxnOp{Kind: core.OpCreate, Key: path, Value: g.value(), Create: opts}
	case r < 6:
		return core.TxnOp{Kind: core.OpDelete, Key: g.zkPath(), ExpectedVersion: version}
	case r < 8:
		return core.TxnOp{Kind: core.OpSetData, Key: g.zkPath(), Value: g.value(), ExpectedVersion: version}
	case r < 9:
		return core.TxnOp{Kind: core.OpCheck, Key: g.zkPath(), ExpectedVersion: version}
	default:
		return core.TxnOp{Kind: core.OpSetACL, Key: g.zkPath(), ExpectedVersion: -1,
			ACL: []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "world", ID: "anyone"}}}}
	}
}
