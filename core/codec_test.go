package core_test

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
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

// EncodeOp sizes its buffer from the op: one allocation however large the
// values, keys and ACLs, nested transactions included, and the form
// decodes back to the op.
func TestEncodeOpAllocatesOnce(t *testing.T) {
	world := []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "world", ID: "anyone"}}}
	big := bytes.Repeat([]byte("v"), 4096)
	create := core.TxnOp{Kind: core.OpCreate, Key: []byte("/bench/key-000001"), Value: big[:256],
		Create: &core.CreateOptions{Mode: core.ModePersistent, ACL: world}}
	put := core.TxnOp{Kind: core.OpPut, Key: []byte("/registry/pods/default/a-rather-long-pod-name"), Value: big}
	rng := core.TxnOp{Kind: core.OpRange, Key: []byte("a"), End: []byte("z"), Range: &core.RangeOptions{Limit: 10}}
	setACL := core.TxnOp{Kind: core.OpSetACL, Key: []byte("/x"), ACL: append(slices.Clone(world), core.ACL{Perms: core.PermRead, ID: core.ID{Scheme: "digest", ID: "user:" + strings.Repeat("h", 28)}}),
		ExpectedVersion: -1}
	inner := &core.Txn{Compares: []core.Compare{{Key: []byte("k"), Value: big[:512]}}, Success: []core.TxnOp{put, put}}
	for _, tc := range []struct {
		name string
		op   core.Op
	}{
		{"create", core.Op{Txn: &core.Txn{Success: []core.TxnOp{create}}}},
		{"put of 4 KiB", core.Op{Txn: &core.Txn{Success: []core.TxnOp{put}}}},
		{"multi", core.Op{Txn: &core.Txn{Success: []core.TxnOp{create, create, setACL, rng, create}}}},
		{"nested", core.Op{Txn: &core.Txn{Compares: inner.Compares, Success: []core.TxnOp{{Kind: core.OpTxn, Txn: inner}}, Failure: []core.TxnOp{rng},
			Auth: []core.ID{{Scheme: "digest", ID: "user:" + strings.Repeat("h", 28)}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(20, func() { core.EncodeOp(&tc.op) }); n != 1 {
				t.Errorf("EncodeOp made %v allocations, want 1", n)
			}
			got, err := core.DecodeOp(core.EncodeOp(&tc.op))
			if err != nil {
				t.Fatal(err)
			}
			if again := core.EncodeOp(got); !bytes.Equal(again, core.EncodeOp(&tc.op)) {
				t.Fatal("the decoded op encodes differently")
			}
		})
	}
}

// AppendNode grows a buffer once: a node record is encoded for every write.
func TestAppendNodeAllocatesOnce(t *testing.T) {
	n := &core.Node{Key: []byte("/a"), Value: bytes.Repeat([]byte("v"), 300), CreateRev: 1 << 40, ModRev: 1 << 41, Version: 1 << 30,
		Lease: -1, Ctime: -1 << 50, Mtime: -1 << 50, Aversion: -1, TTL: 1 << 62,
		ACL: []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "digest", ID: "user:" + strings.Repeat("h", 28)}}, {Perms: core.PermRead, ID: core.ID{Scheme: "world", ID: "anyone"}}}}
	if a := testing.AllocsPerRun(20, func() { core.AppendNode(nil, n) }); a != 1 {
		t.Errorf("AppendNode(nil) made %v allocations, want 1", a)
	}
	got, err := core.DecodeNode(n.Key, core.AppendNode(nil, n))
	if err != nil || !reflect.DeepEqual(got, n) {
		t.Fatalf("DecodeNode = %+v, %v; want %+v", got, err, n)
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
