package store

import (
	"math"
	"slices"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

// TestRecordsPerOp pins which Badger records one entry of each common
// write writes, alone in its group, so that a change of the write path's
// cost in records is a change of this table. Every group adds its core.Meta
// record and, as a write of its own, its applied index.
func TestRecordsPerOp(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var index uint64
	apply := func(op core.TxnOp) uint64 {
		t.Helper()
		applyOne(t, s, &index, op)
		return index
	}
	apply(core.TxnOp{Kind: core.OpCreate, Key: []byte("/p"), Value: []byte{}})
	apply(core.TxnOp{Kind: core.OpPut, Key: []byte("k"), Value: []byte("v")})
	for _, tc := range []struct {
		name string
		op   core.TxnOp
		want []string
	}{
		{"etcd put of an existing key", core.TxnOp{Kind: core.OpPut, Key: []byte("k"), Value: []byte("w")},
			[]string{"e", "m applied", "m core", "n k"}},
		{"etcd put of a new key", core.TxnOp{Kind: core.OpPut, Key: []byte("k2"), Value: []byte("w")},
			[]string{"e", "m applied", "m core", "n k2"}},
		{"etcd put of a new key that is a tree path", core.TxnOp{Kind: core.OpPut, Key: []byte("/p/e"), Value: []byte("w")},
			[]string{"c /p\x00e", "d /p", "e", "m applied", "m core", "n /p/e"}},
		{"ZooKeeper create", core.TxnOp{Kind: core.OpCreate, Key: []byte("/p/c"), Value: []byte("v")},
			[]string{"c /p\x00c", "d /p", "e", "m applied", "m core", "n /p/c"}},
		{"ZooKeeper setData", core.TxnOp{Kind: core.OpSetData, Key: []byte("/p/c"), Value: []byte("w"), ExpectedVersion: -1},
			[]string{"e", "m applied", "m core", "n /p/c"}},
	} {
		at := apply(tc.op)
		if got := recordsAt(t, s, at); !slices.Equal(got, tc.want) {
			t.Errorf("%s writes %q, want %q", tc.name, got, tc.want)
		}
	}
}

// recordsAt lists the records written at version ts, event records by
// their prefix alone.
func recordsAt(t *testing.T, s *Store, ts uint64) []string {
	t.Helper()
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	opts := badger.DefaultIteratorOptions
	opts.AllVersions = true
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	var out []string
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if item.Version() != ts {
			continue
		}
		k := string(item.Key())
		if k[0] == prefixEventLog {
			k = "e"
		} else {
			k = k[:1] + " " + k[1:]
		}
		out = append(out, strings.TrimSpace(k))
	}
	return out
}

// applyOne applies op as the next entry after *index, in a group of its
// own, and returns its result; it fails the test if the entry fails.
func applyOne(t *testing.T, s *Store, index *uint64, op core.TxnOp) core.OpResult {
	t.Helper()
	*index++
	res, _, err := s.Apply([]core.Entry{{Index: *index, Time: int64(*index), Op: txnOf(op)}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("entry %d: %v %v", *index, err, res[0].Err)
	}
	return res[0].Ops[0]
}
