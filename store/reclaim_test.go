package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/januskv/janus/core"
)

// TestReclaimGivesSpaceBack writes large values (some kept in the LSM
// tree, some in the value log, more than one value log file of them),
// deletes them all, compacts, and checks that Reclaim gives back all the
// space, that of the value log file Badger was appending to included, with
// the state intact.
func TestReclaimGivesSpaceBack(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var index uint64
	apply := func(op core.Op) *core.Result {
		t.Helper()
		index++
		res, _, err := s.Apply([]core.Entry{{Index: index, Time: int64(index), Op: op}})
		if err != nil {
			t.Fatalf("apply %d: %v", index, err)
		}
		if res[0].Err != nil {
			t.Fatalf("apply %d: refused: %v", index, res[0].Err)
		}
		return res[0]
	}
	put := func(k string, v []byte) core.Op {
		return core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte(k), Value: v}}}}
	}
	size := func() int64 {
		t.Helper()
		n, err := dirSize(dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	empty := size()
	// 2 MiB values go to the value log (over its 128-byte threshold),
	// 100-byte ones into the LSM tree; 80 MiB of the first fill more than
	// one value log file, so one is no longer the file Badger appends to.
	large := bytes.Repeat([]byte("L"), 2<<20)
	// The medium values are random, so that the tables do not compress
	// them away and what compaction gives back shows.
	medium := make([]byte, 100)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range medium {
		medium[i] = byte(rng.Uint32())
	}
	if int64(len(medium)) >= valueThreshold(defaultMemTableSize) || int64(len(large)) < valueThreshold(defaultMemTableSize) {
		t.Fatalf("the values do not straddle the value threshold %d", valueThreshold(defaultMemTableSize))
	}
	for i := range 40 {
		apply(put(fmt.Sprintf("/big/%03d", i), large))
		for j := range 250 {
			medium[0] = byte(j) // a different value each time
			apply(put(fmt.Sprintf("/mid/%03d/%d", i, j), medium))
		}
	}
	apply(put("/keep", []byte("kept")))
	peak := size()
	vlogsBefore, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	apply(core.Op{Txn: &core.Txn{Success: []core.TxnOp{
		{Kind: core.OpDeleteRange, Key: []byte("/big/"), End: []byte("/big0")},
		{Kind: core.OpDeleteRange, Key: []byte("/mid/"), End: []byte("/mid0")},
	}}})
	res := apply(core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("/after"), Value: []byte("x")}}}})
	apply(core.Op{Compact: &core.Compact{Rev: res.Rev}})
	deleted := size()

	if err := s.Reclaim(); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	after := size()
	// Badger never rewrites the value log file it appends to: Reclaim
	// has it start a new one first, so that nothing is left behind.
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	t.Logf("size on disk: empty %d, after the puts %d, after delete and compact %d, after Reclaim %d; value log files %v before, %v after",
		empty, peak, deleted, after, vlogsBefore, vlogs)
	if slices.Equal(vlogs, vlogsBefore) {
		t.Fatalf("Reclaim rewrote no value log file: %v before, %v after", vlogsBefore, vlogs)
	}
	if after > peak/32 {
		t.Fatalf("Reclaim left %d bytes of a %d-byte peak", after, peak)
	}

	v, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"/keep": "kept", "/after": "x", "/big/000": "", "/mid/039/249": ""} {
		n, err := v.Node([]byte(key))
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		if got := ""; n != nil {
			got = string(n.Value)
			if got != want {
				t.Fatalf("%s = %q, want %q", key, got, want)
			}
		} else if want != "" {
			t.Fatalf("%s is gone", key)
		}
	}
	// The reclaim record is not state: a second Reclaim finds nothing
	// more, and the store reopens as it was.
	if err := s.Reclaim(); err != nil {
		t.Fatalf("second reclaim: %v", err)
	}
	v.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if got := s.AppliedIndex(); got != index {
		t.Fatalf("reopened at applied index %d, want %d", got, index)
	}
	w, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if n, err := w.Node([]byte("/keep")); err != nil || n == nil || string(n.Value) != "kept" {
		t.Fatalf("after reopen /keep = %+v, %v", n, err)
	}
	if n, err := w.Node(metaKey(metaReclaim)[1:]); err != nil || n != nil {
		t.Fatalf("the reclaim record shows as a node: %+v, %v", n, err)
	}
}
