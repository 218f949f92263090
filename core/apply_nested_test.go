package core_test

import (
	"testing"

	"github.com/januskv/janus/core"
)

// TestNestedComparesSeeStateBeforeTxn follows etcd: the branch of a nested
// Txn is decided before the outer Txn runs any op, so its compares do not
// see the outer Txn's earlier writes (its ops still do).
func TestNestedComparesSeeStateBeforeTxn(t *testing.T) {
	m := core.NewMemState()
	put := func(k, v string) core.TxnOp { return core.TxnOp{Kind: core.OpPut, Key: []byte(k), Value: []byte(v)} }
	nested := &core.Txn{
		// Holds only if "k" does not exist yet.
		Compares: []core.Compare{{Key: []byte("k"), Target: core.CompareVersion, Result: core.CompareEqual, Int: 0}},
		Success:  []core.TxnOp{put("branch", "success")},
		Failure:  []core.TxnOp{put("branch", "failure")},
	}
	op := core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("k", "v"), {Kind: core.OpTxn, Txn: nested}}}}
	res, _, err := m.ApplyEntry(&core.Entry{Index: 1, Time: 1, Op: op})
	if err != nil || res.Err != nil {
		t.Fatalf("apply: %v %v", err, res.Err)
	}
	if !res.Ops[1].Txn.Succeeded {
		t.Fatal("nested compare saw the outer Txn's write of k")
	}
	n, _ := m.Node([]byte("branch"))
	if n == nil || string(n.Value) != "success" {
		t.Fatalf("branch = %v, want the success branch's write", n)
	}
}
