package server

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/januskv/janus/core"
)

// TestBadLogEntriesAreRefused puts into the log, past the faces' checks,
// entries no face builds: records that do not decode, and ops over a
// storage limit. Each is answered with a refusal, the member keeps
// applying, and it starts again on its data.
func TestBadLogEntriesAreRefused(t *testing.T) {
	dir := t.TempDir()
	m := openTestMember(t, dir, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	longPut := core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: bytes.Repeat([]byte("k"), 70000)}}}}
	deep := &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("deep")}}}
	for range core.MaxTxnDepth {
		deep = &core.Txn{Success: []core.TxnOp{{Kind: core.OpTxn, Txn: deep}}}
	}
	tooDeep := core.Op{Txn: deep}
	for _, tt := range []struct {
		name string
		data []byte
		want core.Code
	}{
		{"empty record", nil, core.CodeBadArguments},
		{"unknown format", []byte{0xff, 1}, core.CodeBadArguments},
		{"truncated op", core.EncodeOp(&longPut)[:100], core.CodeBadArguments},
		{"70,000-byte key", core.EncodeOp(&longPut), core.CodeKeyTooLong},
		{"nested past MaxTxnDepth", core.EncodeOp(&tooDeep), core.CodeBadArguments},
	} {
		r, err := m.zab.Propose(ctx, tt.data)
		if err != nil {
			t.Fatalf("%s: propose: %v", tt.name, err)
		}
		if got := core.CodeOf(r.(*core.Result).Err); got != tt.want {
			t.Fatalf("%s: got %v, want %v", tt.name, got, tt.want)
		}
		put := core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("after " + tt.name)}}}}
		if res, err := m.Propose(ctx, &put); err != nil || res.Err != nil {
			t.Fatalf("after %s: put: %v %v", tt.name, err, res)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestMember(t, dir, nil)
	defer m.Close()
	put := core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("after restart")}}}}
	if res, err := m.Propose(ctx, &put); err != nil || res.Err != nil {
		t.Fatalf("after restart: put: %v %v", err, res)
	}
}
