package store

import (
	"bytes"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

// badgerMaxKey is the longest key Badger takes (maxKeySize in txn.go);
// TestBadgerKeyLimit checks it against Badger itself.
const badgerMaxKey = 65000

// TestMaxKeyBytesFitsEveryStoreKey checks core's derivation of MaxKeyBytes:
// every store key built from a key or path of that length fits Badger, and
// the longest of them is exactly Badger's limit (so the limit is not lower
// than it needs to be).
func TestMaxKeyBytesFitsEveryStoreKey(t *testing.T) {
	path := []byte("/" + strings.Repeat("p", core.MaxKeyBytes-1))
	parent, _ := core.ParentPath(path)
	built := map[string][]byte{
		"node":            nodeKey(path),
		"dir":             dirKey(path),
		"child":           childKey(parent, core.BaseName(path)),
		"lease attach":    leaseAttachKey(1<<62, path),
		"child of parent": childKey([]byte("/"+strings.Repeat("p", core.MaxKeyBytes-3)), []byte("x")),
	}
	longest := 0
	for name, k := range built {
		if len(k) > badgerMaxKey {
			t.Errorf("%s key of a %d-byte path is %d bytes, over Badger's %d", name, len(path), len(k), badgerMaxKey)
		}
		longest = max(longest, len(k))
	}
	if longest != badgerMaxKey {
		t.Errorf("longest store key of a MaxKeyBytes path is %d bytes; MaxKeyBytes could be %d", longest, core.MaxKeyBytes+badgerMaxKey-longest)
	}
	if core.MaxRecordBytes > valueLogFileSize/2 {
		t.Errorf("core.MaxRecordBytes %d leaves no margin below Badger's value limit %d", core.MaxRecordBytes, valueLogFileSize)
	}
}

// TestBadgerKeyLimit checks that Badger's key limit is what the store
// assumes, and that a record of the longest key and the largest value kept
// in the LSM tree fits one Badger transaction at every memtable size the
// tests and the server use.
func TestBadgerKeyLimit(t *testing.T) {
	for _, memTable := range []int64{1 << 20, 4 << 20, defaultMemTableSize} {
		s, err := Open(Config{Dir: t.TempDir(), MemTableSize: memTable})
		if err != nil {
			t.Fatal(err)
		}
		write := func(key, value []byte) error {
			wb := s.db.NewManagedWriteBatch()
			if err := wb.SetEntryAt(badger.NewEntry(key, value), 1); err != nil {
				wb.Cancel()
				return err
			}
			return wb.Flush()
		}
		threshold := valueThreshold(memTable)
		if err := write(bytes.Repeat([]byte("k"), badgerMaxKey), make([]byte, threshold-1)); err != nil {
			t.Errorf("memtable %d: longest key with a %d-byte value: %v", memTable, threshold-1, err)
		}
		if err := write(bytes.Repeat([]byte("k"), badgerMaxKey+1), nil); err == nil {
			t.Errorf("memtable %d: Badger took a key of %d bytes; core.MaxKeyBytes could grow", memTable, badgerMaxKey+1)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLongestKeysApply writes through Apply every record kind a key of
// core.MaxKeyBytes makes (node, Dir, child index, lease attachment, event),
// then deletes them, and checks that a longer key is refused, not fatal.
func TestLongestKeysApply(t *testing.T) {
	// A small memtable, so that a value kept in the LSM tree with the
	// longest key is near Badger's transaction limit.
	cfg := Config{Dir: t.TempDir(), MemTableSize: 1 << 20}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	long := "/" + strings.Repeat("d", core.MaxKeyBytes/2)
	leaf := long + "/" + strings.Repeat("f", core.MaxKeyBytes-len(long)-2)
	seqBase := long + "/" + strings.Repeat("s", core.MaxKeyBytes-len(long)-1-11)
	txn := func(ops ...core.TxnOp) core.Op { return core.Op{Txn: &core.Txn{Success: ops}} }
	steps := []struct {
		op   core.Op
		want core.Code
	}{
		{core.Op{LeaseGrant: &core.LeaseGrant{ID: 7, TTL: 60}}, core.CodeOK},
		// An implicit parent, a child index entry and a lease attachment
		// of a path of exactly MaxKeyBytes.
		{txn(core.TxnOp{Kind: core.OpPut, Key: []byte(leaf + "x"), Lease: 7, Value: make([]byte, valueThreshold(cfg.MemTableSize)-100)}), core.CodeOK},
		{txn(core.TxnOp{Kind: core.OpCreate, Key: []byte(seqBase), Create: &core.CreateOptions{Sequential: true, Lease: 7}}), core.CodeOK},
		{txn(core.TxnOp{Kind: core.OpSetData, Key: []byte(long), Value: []byte("v"), ExpectedVersion: -1}), core.CodeOK},
		{txn(core.TxnOp{Kind: core.OpPut, Key: []byte(leaf + "xy")}), core.CodeKeyTooLong},
		{txn(core.TxnOp{Kind: core.OpCreate, Key: []byte(seqBase + "s"), Create: &core.CreateOptions{Sequential: true}}), core.CodeKeyTooLong},
		{txn(core.TxnOp{Kind: core.OpPut, Key: bytes.Repeat([]byte("k"), 70000)}), core.CodeKeyTooLong},
		{core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 7}}, core.CodeOK},
		{txn(core.TxnOp{Kind: core.OpDeleteRange, Key: []byte("/"), End: []byte{0}}), core.CodeOK},
	}
	for i, st := range steps {
		res, _, err := s.Apply([]core.Entry{{Index: uint64(i + 1), Time: 1, Op: st.op}})
		if err != nil {
			s.Close()
			t.Fatalf("step %d: apply failed: %v", i, err)
		}
		if got := core.CodeOf(res[0].Err); got != st.want {
			t.Errorf("step %d: got %v, want %v", i, got, st.want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEventBytesBoundsTheRecord applies the entries whose event records
// inline nodes (a key written twice, an ACL change before or after a write
// in the same multi, an implicit parent removed) over a node with a large
// value, and checks each record against Apply's bound.
func TestEventBytesBoundsTheRecord(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acl := []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "world", ID: "anyone"}}}
	big := make([]byte, 512<<10)
	txn := func(ops ...core.TxnOp) core.Op { return core.Op{Txn: &core.Txn{Success: ops}} }
	setData := func(p string, v []byte) core.TxnOp {
		return core.TxnOp{Kind: core.OpSetData, Key: []byte(p), Value: v, ExpectedVersion: -1}
	}
	setACL := func(p string) core.TxnOp {
		return core.TxnOp{Kind: core.OpSetACL, Key: []byte(p), ACL: acl, ExpectedVersion: -1}
	}
	ops := []core.Op{
		txn(core.TxnOp{Kind: core.OpPut, Key: []byte("/a/b/c"), Value: big}),
		txn(core.TxnOp{Kind: core.OpPut, Key: []byte("/a"), Value: big}),
		txn(setACL("/a"), setData("/a", []byte("x"))),
		txn(setData("/a", big), setACL("/a")),
		txn(setData("/a", big), setACL("/a"), setData("/a", []byte("y")), setACL("/a"), setData("/a", big)),
		txn(setACL("/a/b/c"), core.TxnOp{Kind: core.OpDelete, Key: []byte("/a/b/c"), ExpectedVersion: -1}),
		txn(core.TxnOp{Kind: core.OpPut, Key: []byte("k"), Value: big}, core.TxnOp{Kind: core.OpDeleteRange, Key: []byte("k")},
			core.TxnOp{Kind: core.OpPut, Key: []byte("k"), Value: big}),
	}
	for i, op := range ops {
		res, batches, err := s.Apply([]core.Entry{{Index: uint64(i + 1), Time: 1, Op: op}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("entry %d: %v %v", i, err, res[0].Err)
		}
		b := batches[0]
		r := reader{txn: s.db.NewTransactionAt(b.Index, false)}
		rec, err := r.get(eventKey(b.Rev))
		r.txn.Discard()
		if err != nil || len(rec) > b.EventBytes {
			t.Errorf("entry %d: event record of %d bytes, Apply bounded it by %d (%v)", i, len(rec), b.EventBytes, err)
		}
	}
}
