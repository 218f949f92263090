package core_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/januskv/janus/core"
)

// TestOpTrailersDecodeOldAndNew pins the log form's optional trailers: an
// entry logged before auth checks or origins existed decodes unchanged, and
// every combination of the two round-trips.
func TestOpTrailersDecodeOldAndNew(t *testing.T) {
	compact := func(check *core.AuthCheck, origin core.Origin) core.Op {
		return core.Op{Compact: &core.Compact{Rev: 5}, AuthCheck: check, Origin: origin}
	}
	for _, tc := range []struct {
		name string
		op   core.Op
		// enc is the log form, written out byte by byte so that a change
		// to it shows here: format 1, tag 4 (Compact), varint 5 = 0x0a,
		// then the trailers.
		enc []byte
	}{
		{"before either trailer", compact(nil, core.OriginUnknown), []byte{1, 4, 0x0a}},
		{"auth check only, as logged before origins", compact(&core.AuthCheck{Rev: 7, Enabled: true}, core.OriginUnknown), []byte{1, 4, 0x0a, 7, 1}},
		{"auth check off", compact(&core.AuthCheck{Rev: 3}, core.OriginUnknown), []byte{1, 4, 0x0a, 3, 0}},
		{"origin without auth check", compact(nil, core.OriginEtcd), []byte{1, 4, 0x0a, 0, 2, 1}},
		{"both", compact(&core.AuthCheck{Rev: 7, Enabled: true}, core.OriginZooKeeper), []byte{1, 4, 0x0a, 7, 1, 2}},
		{"member's own", compact(nil, core.OriginMember), []byte{1, 4, 0x0a, 0, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := core.EncodeOp(&tc.op); !bytes.Equal(got, tc.enc) {
				t.Fatalf("EncodeOp = %v, want %v", got, tc.enc)
			}
			got, err := core.DecodeOp(tc.enc)
			if err != nil {
				t.Fatalf("DecodeOp(%v): %v", tc.enc, err)
			}
			if !reflect.DeepEqual(*got, tc.op) {
				t.Fatalf("DecodeOp(%v) = %+v, want %+v", tc.enc, *got, tc.op)
			}
		})
	}
	// An auth check's flag is 0 or 1, or the "none" mark when an origin
	// follows; anything else is corrupt.
	if _, err := core.DecodeOp([]byte{1, 4, 0x0a, 7, 9}); err == nil {
		t.Fatal("DecodeOp accepted an auth check flag of 9")
	}
}

// TestOriginIsMetadata: the origin reaches the Batch and changes nothing
// else Apply decides.
func TestOriginIsMetadata(t *testing.T) {
	put := &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("k"), Value: []byte("v")}}}
	var hashes [][32]byte
	var results []*core.Result
	for _, origin := range []core.Origin{core.OriginUnknown, core.OriginEtcd, core.OriginZooKeeper, core.OriginMember} {
		m := core.NewMemState()
		ov := core.NewOverlay(m)
		res, b, err := core.Apply(ov, &core.Entry{Index: 1, Time: 1, Op: core.Op{Txn: put, Origin: origin}})
		if err != nil {
			t.Fatal(err)
		}
		if b.Origin != origin {
			t.Fatalf("batch origin %v, want %v", b.Origin, origin)
		}
		m.Write(b)
		hashes = append(hashes, m.Hash())
		results = append(results, res)
	}
	for i := range hashes {
		if hashes[i] != hashes[0] || !reflect.DeepEqual(results[i], results[0]) {
			t.Fatalf("origin %d changed what Apply did", i)
		}
	}
}
