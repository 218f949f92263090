package core_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/januskv/janus/core"
)

func putKey(key []byte) core.TxnOp { return core.TxnOp{Kind: core.OpPut, Key: key} }

func limitTxn(ops ...core.TxnOp) core.Op { return core.Op{Txn: &core.Txn{Success: ops}} }

// nested returns a Txn chain depth deep whose innermost Txn runs inner.
func nested(depth int, inner ...core.TxnOp) core.Op {
	t := &core.Txn{Success: inner}
	for range depth - 1 {
		t = &core.Txn{Success: []core.TxnOp{{Kind: core.OpTxn, Txn: t}}}
	}
	return core.Op{Txn: t}
}

func TestCheckOp(t *testing.T) {
	key := func(n int) []byte { return bytes.Repeat([]byte("k"), n) }
	path := func(n int) []byte { return append([]byte("/"), bytes.Repeat([]byte("p"), n-1)...) }
	seq := &core.CreateOptions{Sequential: true}
	tests := []struct {
		name string
		op   core.Op
		want core.Code
	}{
		{"longest key", limitTxn(putKey(key(core.MaxKeyBytes))), core.CodeOK},
		{"key one too long", limitTxn(putKey(key(core.MaxKeyBytes + 1))), core.CodeKeyTooLong},
		{"65,000-byte key", limitTxn(putKey(key(65000))), core.CodeKeyTooLong},
		{"long key in a nested txn", nested(3, putKey(key(70000))), core.CodeKeyTooLong},
		{"long key in the branch that will not run", core.Op{Txn: &core.Txn{Failure: []core.TxnOp{putKey(key(70000))}}}, core.CodeKeyTooLong},
		{"range of a long key", limitTxn(core.TxnOp{Kind: core.OpRange, Key: key(70000)}), core.CodeOK},
		{"delete of a long key", limitTxn(core.TxnOp{Kind: core.OpDeleteRange, Key: key(70000)}), core.CodeOK},
		{"longest create", limitTxn(core.TxnOp{Kind: core.OpCreate, Key: path(core.MaxKeyBytes)}), core.CodeOK},
		{"create one too long", limitTxn(core.TxnOp{Kind: core.OpCreate, Key: path(core.MaxKeyBytes + 1)}), core.CodeKeyTooLong},
		{"sequential create counts its suffix", limitTxn(core.TxnOp{Kind: core.OpCreate, Key: path(core.MaxKeyBytes - 10), Create: seq}), core.CodeKeyTooLong},
		{"longest sequential create", limitTxn(core.TxnOp{Kind: core.OpCreate, Key: path(core.MaxKeyBytes - 11), Create: seq}), core.CodeOK},
		{"setData of a long path", limitTxn(core.TxnOp{Kind: core.OpSetData, Key: path(70000)}), core.CodeKeyTooLong},
		{"value too large", limitTxn(core.TxnOp{Kind: core.OpPut, Key: key(1), Value: make([]byte, core.MaxRecordBytes/2+1)}), core.CodeTooLarge},
		{"129 deep", nested(129, putKey(key(1))), core.CodeOK},
		{"deepest", nested(core.MaxTxnDepth, putKey(key(1))), core.CodeOK},
		{"too deep", nested(core.MaxTxnDepth + 1), core.CodeTooDeep},
		{"txn op without a txn", limitTxn(core.TxnOp{Kind: core.OpTxn}), core.CodeBadArguments},
		{"session password too large", core.Op{LeaseGrant: &core.LeaseGrant{ID: 1, Session: &core.Session{Password: make([]byte, core.MaxRecordBytes/2+1)}}}, core.CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.CodeOf(core.CheckOp(&tt.op)); got != tt.want {
				t.Fatalf("CheckOp: got %v, want %v", got, tt.want)
			}
			// Apply refuses the same ops (state-free limits first),
			// changing nothing, and never fails.
			m := core.NewMemState()
			res, b, err := m.ApplyEntry(&core.Entry{Index: 1, Time: 1, Op: tt.op})
			if err != nil {
				t.Fatalf("apply failed: %v", err)
			}
			if tt.want != core.CodeOK {
				if got := core.CodeOf(res.Err); got != tt.want {
					t.Fatalf("apply: got %v, want %v", got, tt.want)
				}
				if b.Changed || len(b.Nodes) != 0 || res.Rev != 1 {
					t.Fatalf("a refused op changed the state: %+v", b)
				}
			}
		})
	}
}

// TestDeepTxnThroughTheLog checks that a Txn nested as deep as etcd lets a
// request nest survives the log's encoding and applies, and that a record
// nested deeper than the limit is refused, not fatal.
func TestDeepTxnThroughTheLog(t *testing.T) {
	for _, depth := range []int{66, 129, 5000, core.MaxTxnDepth, core.MaxTxnDepth + 1} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			op := nested(depth, putKey([]byte("deep")))
			e, err := core.LogEntry(1, 1, core.EncodeOp(&op))
			if depth > core.MaxTxnDepth {
				if err == nil {
					t.Fatal("decoded a Txn nested over MaxTxnDepth")
				}
			} else if err != nil {
				t.Fatalf("decode: %v", err)
			}
			m := core.NewMemState()
			res, _, err := m.ApplyEntry(&e)
			if err != nil {
				t.Fatalf("apply failed: %v", err)
			}
			n, _ := m.Node([]byte("deep"))
			if depth > core.MaxTxnDepth {
				if res.Err == nil || n != nil {
					t.Fatalf("applied a Txn nested %d deep", depth)
				}
				return
			}
			if res.Err != nil || n == nil {
				t.Fatalf("refused a Txn nested %d deep: %v", depth, res.Err)
			}
		})
	}
}

// TestUndecodableEntryIsRefused feeds records no face builds to the
// decode-and-apply path a member runs on every committed entry.
func TestUndecodableEntryIsRefused(t *testing.T) {
	valid := limitTxn(putKey([]byte("k")))
	enc := core.EncodeOp(&valid)
	for _, data := range [][]byte{nil, {}, {0xff}, {1, 9}, enc[:len(enc)-1], append(bytes.Clone(enc), 0)} {
		e, err := core.LogEntry(1, 1, data)
		if err == nil {
			t.Fatalf("%x decoded", data)
		}
		res, _, err := core.NewMemState().ApplyEntry(&e)
		if err != nil {
			t.Fatalf("%x: apply failed: %v", data, err)
		}
		if core.CodeOf(res.Err) != core.CodeBadArguments {
			t.Fatalf("%x: got %v, want a bad-arguments refusal", data, res.Err)
		}
	}
}

// TestEventRecordLimit checks that an entry whose event record would not
// fit one stored record (a delete of many long keys) is refused whole,
// while a smaller one applies.
func TestEventRecordLimit(t *testing.T) {
	m := core.NewMemState()
	index := uint64(0)
	apply := func(op core.Op) *core.Result {
		t.Helper()
		index++
		res, _, err := m.ApplyEntry(&core.Entry{Index: index, Time: 1, Op: op})
		if err != nil {
			t.Fatalf("apply failed: %v", err)
		}
		return res
	}
	keys := core.MaxRecordBytes/core.MaxKeyBytes + 1
	for i := range keys {
		k := append(fmt.Appendf(nil, "big/%04d/", i), bytes.Repeat([]byte("k"), core.MaxKeyBytes-9)...)
		if res := apply(limitTxn(putKey(k))); res.Err != nil {
			t.Fatalf("put %d: %v", i, res.Err)
		}
	}
	all := limitTxn(core.TxnOp{Kind: core.OpDeleteRange, Key: []byte("big/"), End: []byte("big0")})
	if res := apply(all); core.CodeOf(res.Err) != core.CodeTooLarge {
		t.Fatalf("delete of %d keys of %d bytes: got %v, want too large", keys, core.MaxKeyBytes, res.Err)
	}
	if n, _ := m.Node(append([]byte("big/0000/"), bytes.Repeat([]byte("k"), core.MaxKeyBytes-9)...)); n == nil {
		t.Fatal("the refused delete removed a key")
	}
	half := limitTxn(core.TxnOp{Kind: core.OpDeleteRange, Key: []byte("big/"), End: fmt.Appendf(nil, "big/%04d/", keys/2)})
	if res := apply(half); res.Err != nil || res.Ops[0].Deleted != int64(keys/2) {
		t.Fatalf("delete of half the keys: %+v", res)
	}
	if res := apply(all); res.Err != nil {
		t.Fatalf("delete of the rest: %v", res.Err)
	}
}

// TestEventRecordBoundIsNotTheNodes checks that the event record limit
// counts what the store keeps: the nodes of puts are read back from their
// own records, so a Txn whose keys fit one event record applies however
// large its values are in total.
func TestEventRecordBoundIsNotTheNodes(t *testing.T) {
	var ops []core.TxnOp
	total := 0
	for i := 0; total < core.MaxRecordBytes*3/2; i++ {
		k := append(fmt.Appendf(nil, "big/%04d/", i), bytes.Repeat([]byte("k"), 60000)...)
		ops = append(ops, core.TxnOp{Kind: core.OpPut, Key: k, Value: make([]byte, 60000)})
		total += 2 * 60000
	}
	res, _, err := core.NewMemState().ApplyEntry(&core.Entry{Index: 1, Time: 1, Op: limitTxn(ops...)})
	if err != nil || res.Err != nil {
		t.Fatalf("%d puts of %d bytes of keys and values: %v %v", len(ops), total, err, res.Err)
	}
}
