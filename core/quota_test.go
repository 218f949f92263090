package core_test

import (
	"testing"

	"github.com/januskv/janus/core"
)

// TestNoSpaceRefusesOnlyWhatGrows raises NOSPACE and applies one op of
// each kind: the ones that would grow the state are refused with
// CodeNoSpace and change nothing, the rest run; disarming lets writes in
// again.
func TestNoSpaceRefusesOnlyWhatGrows(t *testing.T) {
	h := newHarness(t)
	h.txn(put("a", "1"), put("b", "2"))
	wantCode(t, h.zk(create("/z", "x")), core.CodeOK)
	wantCode(t, h.apply1(core.Op{LeaseGrant: &core.LeaseGrant{ID: 7, TTL: 10}}), core.CodeOK)
	noSpace := core.Alarm{Member: 2, Type: core.AlarmNoSpace}
	wantCode(t, h.apply1(core.Op{Alarm: &core.AlarmChange{Activate: true, Alarm: noSpace}}), core.CodeOK)

	nested := core.TxnOp{Kind: core.OpTxn, Txn: &core.Txn{Success: []core.TxnOp{put("n", "1")}}}
	rangeOp := core.TxnOp{Kind: core.OpRange, Key: []byte("a"), Range: &core.RangeOptions{}}
	steps := []struct {
		name string
		op   core.Op
		code core.Code
	}{
		{"put", core.Op{Txn: &core.Txn{Success: []core.TxnOp{put("c", "3")}}}, core.CodeNoSpace},
		{"put in the failure branch", core.Op{Txn: &core.Txn{Failure: []core.TxnOp{put("c", "3")}}}, core.CodeNoSpace},
		{"nested put", core.Op{Txn: &core.Txn{Success: []core.TxnOp{nested}}}, core.CodeNoSpace},
		{"zk create", core.Op{Txn: &core.Txn{Success: []core.TxnOp{create("/y", "")}}}, core.CodeNoSpace},
		{"zk setData", core.Op{Txn: &core.Txn{Success: []core.TxnOp{setData("/z", "more", -1)}}}, core.CodeNoSpace},
		{"etcd lease grant", core.Op{LeaseGrant: &core.LeaseGrant{ID: 8, TTL: 10}}, core.CodeNoSpace},
		{"zk session", core.Op{LeaseGrant: &core.LeaseGrant{ID: 9, TTL: 10, Session: &core.Session{TimeoutMs: 10000, Password: []byte("p")}}}, core.CodeOK},
		{"txn of reads", core.Op{Txn: &core.Txn{Success: []core.TxnOp{rangeOp}}}, core.CodeOK},
		{"delete", core.Op{Txn: &core.Txn{Success: []core.TxnOp{del("b")}}}, core.CodeOK},
		{"zk delete", core.Op{Txn: &core.Txn{Success: []core.TxnOp{zdel("/z", -1)}}}, core.CodeOK},
		{"lease revoke", core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 7}}, core.CodeOK},
		{"compact", core.Op{Compact: &core.Compact{Rev: 2}}, core.CodeOK},
	}
	for _, s := range steps {
		before := h.m.Hash()
		res := h.apply1(s.op)
		if core.CodeOf(res.Err) != s.code {
			t.Fatalf("%s: %v, want %v", s.name, res.Err, s.code)
		}
		if s.code == core.CodeNoSpace && h.m.Hash() != before {
			t.Fatalf("%s: a refused op changed the state", s.name)
		}
	}

	wantCode(t, h.apply1(core.Op{Alarm: &core.AlarmChange{Alarm: noSpace}}), core.CodeOK)
	wantCode(t, h.txn(put("c", "3")), core.CodeOK)
}

func (h *harness) apply1(op core.Op) *core.Result {
	h.t.Helper()
	res, _ := h.apply(op)
	return res
}
