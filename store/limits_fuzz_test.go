package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/januskv/janus/core"
)

// FuzzApplyLimits builds, from the fuzzer's bytes, ops of every kind a face
// can propose (keys and paths of every length up to past Badger's limit,
// values, leases, sessions, nesting up to past core.MaxTxnDepth) plus the
// raw bytes as a log record, and applies each through the log's encoding
// to core.MemState and to a Store. No entry may fail to apply: refusals
// must come as results, the same on both, and CheckOp's refusals must be
// Apply's.
//
// One Store serves every input of a fuzzing process (opening Badger per
// input would leave few executions); each input's keys are deleted and its
// leases revoked at the end, and the MemState follows the same entries.
func FuzzApplyLimits(f *testing.F) {
	f.Add([]byte{0, 6, 1, 2, 3})
	f.Add([]byte{1, 7, 0, 9, 4, 5})
	f.Add([]byte{2, 8, 3, 1, 2, 6, 6})
	f.Add([]byte{3, 2, 2, 8, 7})
	f.Add([]byte{4, 9, 9, 9, 9})
	f.Add([]byte{5, 1, 3, 0, 6, 6, 2, 7, 1})
	f.Add([]byte{6, 5, 7, 7, 3})
	f.Add([]byte{7, 3, 8})
	// Longer inputs make whole sequences of ops; the mutator seldom grows
	// short ones that far.
	rng := rand.New(rand.NewPCG(11, 12))
	for range 32 {
		seed := make([]byte, 128)
		for i := range seed {
			seed[i] = byte(rng.IntN(256))
		}
		f.Add(seed)
	}
	// A memtable of 4 MiB: small enough that long keys and values near the
	// LSM threshold meet Badger's transaction limit, big enough that
	// memtable flushes do not stall every other write.
	s, err := Open(Config{Dir: f.TempDir(), MemTableSize: 4 << 20, BlockCacheSize: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	mem := core.NewMemState()
	index := uint64(0)
	apply := func(t *testing.T, e core.Entry) *core.Result {
		t.Helper()
		index++
		e.Index, e.Time = index, int64(index)
		want, _, err := mem.ApplyEntry(&e)
		if err != nil {
			t.Fatalf("core.Apply failed on %s: %v", describe(&e.Op), err)
		}
		got, batches, err := s.Apply([]core.Entry{e})
		if err != nil {
			t.Fatalf("store.Apply failed on %s: %v", describe(&e.Op), err)
		}
		if b := batches[0]; b.Changed {
			// Apply's bound of the event record holds.
			r := reader{txn: s.db.NewTransactionAt(b.Index, false)}
			rec, err := r.get(eventKey(b.Rev))
			r.txn.Discard()
			if err != nil || len(rec) > b.EventBytes {
				t.Fatalf("%s: event record of %d bytes, Apply bounded it by %d (%v)", describe(&e.Op), len(rec), b.EventBytes, err)
			}
		}
		if core.CodeOf(got[0].Err) != core.CodeOf(want.Err) || got[0].Rev != want.Rev {
			t.Fatalf("%s: store answered %v at %d, core %v at %d", describe(&e.Op), got[0].Err, got[0].Rev, want.Err, want.Rev)
		}
		return got[0]
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &limitGen{b: data}
		// Leases for puts and ephemeral creates to attach keys to.
		for id := int64(1); id <= 2; id++ {
			apply(t, core.Entry{Op: core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: 60}}})
		}
		for range 16 {
			if len(g.b) == 0 {
				break
			}
			op := g.op()
			refused := core.CheckOp(&op)
			e, err := core.LogEntry(0, 0, core.EncodeOp(&op))
			if err != nil && refused == nil {
				t.Fatalf("%s passes CheckOp but does not decode: %v", describe(&op), err)
			}
			res := apply(t, e)
			if refused != nil && res.Err == nil {
				t.Fatalf("CheckOp refuses %s (%v), Apply took it", describe(&op), refused)
			}
		}
		// The raw bytes as a log record: decoded or not, never fatal.
		e, _ := core.LogEntry(0, 0, data)
		apply(t, e)
		// Leave an empty store for the next input.
		for id := int64(1); id <= 3; id++ {
			apply(t, core.Entry{Op: core.Op{LeaseRevoke: &core.LeaseRevoke{ID: id}}})
		}
		apply(t, core.Entry{Op: core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpDeleteRange, Key: []byte{0}, End: []byte{0}}}}}})
	})
}

// describe names an op without its (possibly huge) keys.
func describe(op *core.Op) string {
	switch {
	case op.Txn != nil:
		depth, ops, longest := txnShape(op.Txn)
		return fmt.Sprintf("txn (%d deep, %d ops, longest key %d bytes)", depth, ops, longest)
	case op.LeaseGrant != nil:
		return fmt.Sprintf("lease grant %d", op.LeaseGrant.ID)
	case op.LeaseRevoke != nil:
		return fmt.Sprintf("lease revoke %d", op.LeaseRevoke.ID)
	case op.Compact != nil:
		return fmt.Sprintf("compact %d", op.Compact.Rev)
	}
	return "empty op"
}

// txnShape returns how deep t nests, how many ops it holds and its longest
// key, walking the chain without recursion.
func txnShape(t *core.Txn) (depth, ops, longest int) {
	level := []*core.Txn{t}
	for len(level) > 0 {
		depth++
		var next []*core.Txn
		for _, t := range level {
			for _, o := range append(append([]core.TxnOp{}, t.Success...), t.Failure...) {
				ops++
				longest = max(longest, len(o.Key))
				if o.Txn != nil {
					next = append(next, o.Txn)
				}
			}
		}
		level = next
	}
	return depth, ops, longest
}

// limitGen turns fuzz bytes into ops, reading one byte per choice (zero
// once the input is used up).
type limitGen struct{ b []byte }

func (g *limitGen) n(k int) int {
	if len(g.b) == 0 {
		return 0
	}
	v := g.b[0]
	g.b = g.b[1:]
	return int(v) % k
}

// keyLengths are the lengths worth trying: short ones, and every edge of
// core.MaxKeyBytes and of Badger's key limit.
var keyLengths = []int{1, 3, 40, core.MaxKeyBytes - 11, core.MaxKeyBytes - 1, core.MaxKeyBytes,
	core.MaxKeyBytes + 1, 65000, 65001, 70000}

// key returns an etcd key or a ZooKeeper path (flat or nested) of one of
// keyLengths, made of few distinct characters so ops collide.
func (g *limitGen) key() []byte {
	n := keyLengths[g.n(2*len(keyLengths))%len(keyLengths)]
	if g.n(2) == 0 {
		n = keyLengths[g.n(3)] // short keys half the time: they are cheap
	}
	fill := byte('a' + g.n(3))
	var k []byte
	switch g.n(3) {
	case 0:
		k = []byte{'k'}
	case 1:
		k = []byte{'/'}
	default:
		k = []byte{'/', 'd', '/'}
	}
	for len(k) < n {
		k = append(k, fill)
	}
	return k[:max(n, 1)]
}

func (g *limitGen) value() []byte {
	switch g.n(32) {
	case 0:
		return nil
	case 1:
		return make([]byte, 200<<10)
	}
	return bytes.Repeat([]byte{'v'}, g.n(20))
}

func (g *limitGen) op() core.Op {
	switch g.n(8) {
	case 0:
		return core.Op{LeaseGrant: &core.LeaseGrant{ID: int64(1 + g.n(3)), TTL: 60, Session: g.session()}}
	case 1:
		return core.Op{LeaseRevoke: &core.LeaseRevoke{ID: int64(1 + g.n(3))}}
	case 2:
		// A chain nested at one of the depths that matter.
		// The deepest ones take a tenth of a second: rarely.
		depth := []int{2, 65, 66, 129, 1000, 2, 65, 66, 129, core.MaxTxnDepth, core.MaxTxnDepth + 1}[g.n(11)]
		if depth > 1000 && g.n(8) != 0 {
			depth = 67
		}
		t := &core.Txn{Success: []core.TxnOp{g.txnOp(0)}}
		for range depth - 1 {
			t = &core.Txn{Success: []core.TxnOp{{Kind: core.OpTxn, Txn: t}}}
		}
		return core.Op{Txn: t}
	}
	return core.Op{Txn: g.txn(1)}
}

func (g *limitGen) session() *core.Session {
	if g.n(2) == 0 {
		return nil
	}
	return &core.Session{TimeoutMs: 4000, Password: bytes.Repeat([]byte{'p'}, 16)}
}

func (g *limitGen) txn(depth int) *core.Txn {
	t := &core.Txn{}
	if g.n(3) == 0 {
		t.Compares = []core.Compare{{Key: g.key(), Target: core.CompareVersion, Result: core.CompareEqual}}
	}
	for range 1 + g.n(2) {
		t.Success = append(t.Success, g.txnOp(depth))
	}
	if g.n(2) == 0 {
		t.Failure = append(t.Failure, g.txnOp(depth))
	}
	if g.n(2) == 0 {
		t.Auth = []core.ID{{Scheme: "world", ID: "anyone"}}
	}
	return t
}

func (g *limitGen) txnOp(depth int) core.TxnOp {
	key := g.key()
	switch g.n(10) {
	case 0:
		return core.TxnOp{Kind: core.OpPut, Key: key, Value: g.value(), Lease: int64(g.n(4)), PrevKV: g.n(2) == 0}
	case 1:
		end := []byte(nil)
		if g.n(2) == 0 {
			end = []byte{0}
		}
		return core.TxnOp{Kind: core.OpDeleteRange, Key: key, End: end, PrevKV: true}
	case 2:
		return core.TxnOp{Kind: core.OpRange, Key: key, End: []byte{0}, Range: &core.RangeOptions{Limit: 3}}
	case 3:
		if depth > 0 && depth < 3 {
			return core.TxnOp{Kind: core.OpTxn, Txn: g.txn(depth + 1)}
		}
		return core.TxnOp{Kind: core.OpPut, Key: key}
	case 4, 5:
		opts := &core.CreateOptions{Sequential: g.n(2) == 0, Lease: int64(g.n(4)), ACL: []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "world", ID: "anyone"}}}}
		if g.n(4) == 0 {
			opts.Mode, opts.TTL = core.ModeContainer, 0
		}
		return core.TxnOp{Kind: core.OpCreate, Key: key, Value: g.value(), Create: opts}
	case 6:
		return core.TxnOp{Kind: core.OpDelete, Key: key, ExpectedVersion: -1}
	case 7:
		return core.TxnOp{Kind: core.OpSetData, Key: key, Value: g.value(), ExpectedVersion: -1}
	case 8:
		return core.TxnOp{Kind: core.OpSetACL, Key: key, ExpectedVersion: -1, ACL: []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "world", ID: "anyone"}}}}
	}
	return core.TxnOp{Kind: core.OpCheck, Key: key, ExpectedVersion: -1}
}
