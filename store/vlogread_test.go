package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/januskv/janus/core"
)

// TestReadAcrossValueLogGC: a read that looks a key up, then has value log
// GC move its value and delete the file before it reads the value, must
// still return the value. Badger hands over an empty value then (GC does
// not wait for single lookups as it waits for iterators), which decoded as
// a corrupt record and, read by Apply, stopped the member.
func TestReadAcrossValueLogGC(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), MemTableSize: 2 << 20, BlockCacheSize: 1 << 20, valueLogFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := int(valueThreshold(2<<20)) + 512
	var index uint64
	put := func(k string, fill byte) *core.Result {
		t.Helper()
		index++
		op := core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte(k), Value: bytes.Repeat([]byte{fill}, big)}}}}
		res, _, err := s.Apply([]core.Entry{{Index: index, Time: int64(index), Op: op}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("put %s: %v %v", k, err, res[0].Err)
		}
		return res[0]
	}
	// The value read sits in the first value log file, among values that
	// are overwritten: the file becomes mostly garbage.
	put("/live", 'L')
	var res *core.Result
	for i := range 60 {
		res = put(fmt.Sprintf("/g/%d", i%3), byte('a'+i%26))
	}
	index++
	if _, _, err := s.Apply([]core.Entry{{Index: index, Time: int64(index), Op: core.Op{Compact: &core.Compact{Rev: res.Rev}}}}); err != nil {
		t.Fatal(err)
	}
	// Count the garbage (as Reclaim does) without rewriting anything yet.
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.flushMemtables(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flatten(2); err != nil {
		t.Fatal(err)
	}
	v, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	lookups, rewritten := 0, 0
	v.reader.afterLookup = func() {
		lookups++
		if lookups == 1 {
			if rewritten, err = s.ReclaimValueLog(); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := v.Node([]byte("/live"))
	if err != nil {
		t.Fatalf("read after GC deleted the value's file: %v", err)
	}
	if n == nil || !bytes.Equal(n.Value, bytes.Repeat([]byte{'L'}, big)) {
		t.Fatalf("read after GC deleted the value's file: %+v", n)
	}
	if rewritten == 0 || lookups != 2 {
		t.Fatalf("GC rewrote %d files, the read looked the key up %d times: the race did not happen", rewritten, lookups)
	}
}
