package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/januskv/janus/core"
)

func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t, 9)
	for h.gen.index < 600 {
		h.step(h.groupSize())
	}
	var snap bytes.Buffer
	index, err := h.s.WriteSnapshot(&snap)
	if err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	if index != h.s.AppliedIndex() {
		t.Fatalf("snapshot index %d, applied %d", index, h.s.AppliedIndex())
	}

	restored, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	for name, bad := range map[string][]byte{
		"truncated": snap.Bytes()[:snap.Len()/2],
		"flipped":   flipByte(snap.Bytes(), snap.Len()/3),
		"empty":     nil,
	} {
		if err := restored.RestoreSnapshot(bytes.NewReader(bad)); err == nil {
			t.Fatalf("%s snapshot restored", name)
		}
		if empty, err := restored.isEmpty(); err != nil || !empty {
			t.Fatalf("%s snapshot left the store non-empty (%v)", name, err)
		}
	}
	if err := restored.RestoreSnapshot(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := restored.RestoreSnapshot(bytes.NewReader(snap.Bytes())); !errors.Is(err, errNotEmpty) {
		t.Fatalf("restore into a non-empty store: %v", err)
	}
	rev := h.meta().Rev
	if restored.AppliedIndex() != index || restored.Rev() != rev {
		t.Fatalf("restored at index %d rev %d, want %d %d", restored.AppliedIndex(), restored.Rev(), index, rev)
	}
	if _, err := restored.At(rev - 1); !errors.Is(err, core.ErrCompacted) {
		t.Fatalf("At(%d) before the snapshot: %v, want compacted", rev-1, err)
	}
	if _, err := restored.Events(rev, 0); !errors.Is(err, core.ErrCompacted) {
		t.Fatalf("Events(%d) of the snapshot's revision: %v, want compacted", rev, err)
	}
	// The compact revision it reports is the first one it can replay, so
	// that a watch refused as compacted can start again from it.
	if st, err := restored.Status(); err != nil || st.CompactRev != rev+1 {
		t.Fatalf("restored store's compact revision %d (%v), want %d, the first after the snapshot's", st.CompactRev, err, rev+1)
	}
	if _, err := restored.Events(rev+1, 0); err != nil {
		t.Fatalf("Events(%d), from the compact revision it reports: %v", rev+1, err)
	}

	// Carry on with the restored store in the original's place: it must
	// keep agreeing with the MemState, history and events included, across a
	// restart too.
	h.s.Close()
	h.s = restored
	h.cfg.Dir = restored.db.Opts().Dir
	h.checkLatest()
	for h.gen.index < 1200 {
		h.step(h.groupSize())
		h.checkLatest()
		h.checkHistory(2)
		h.checkEvents()
	}
	h.reopen()
	h.checkLatest()
	h.checkHistory(20)
}

func flipByte(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

func TestStatusAndSync(t *testing.T) {
	h := newHarness(t, 4)
	for h.gen.index < 300 {
		h.step(h.groupSize())
	}
	st, err := h.s.Status()
	if err != nil {
		t.Fatal(err)
	}
	meta := h.meta()
	if st.DBSize <= 0 || st.Rev != meta.Rev || st.CompactRev != meta.CompactRev || st.AppliedIndex != h.s.AppliedIndex() {
		t.Fatalf("status %+v, want rev %d compact %d applied %d and a size", st, meta.Rev, meta.CompactRev, h.s.AppliedIndex())
	}
	synced, err := h.s.Sync()
	if err != nil || synced != h.s.AppliedIndex() {
		t.Fatalf("sync covered %d (%v), want %d", synced, err, h.s.AppliedIndex())
	}
}

// TestApplyGoesOnWhileSyncFsyncs checks that Sync does not hold applies up
// while it fsyncs Badger's logs (the member syncs for every log trim, and
// an fsync takes tens of milliseconds on a busy disk), and that it records
// as durable only the index it read before them, not what was applied
// meanwhile.
func TestApplyGoesOnWhileSyncFsyncs(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(index uint64) error {
		_, _, err := s.Apply([]core.Entry{putEntry(index, []byte("k"), []byte(fmt.Sprint(index)))})
		return err
	}
	for i := uint64(1); i <= 10; i++ {
		if err := put(i); err != nil {
			t.Fatal(err)
		}
	}
	applied := make(chan error, 1)
	s.onFilesSynced = func() {
		s.onFilesSynced = nil
		go func() { applied <- put(11) }()
		select {
		case err := <-applied:
			applied <- err
		case <-time.After(time.Minute):
			applied <- errors.New("an apply waited for Sync's fsyncs")
		}
	}
	synced, err := s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if synced != 10 || s.AppliedIndex() != 11 {
		t.Fatalf("sync covered %d with %d applied, want 10 with 11", synced, s.AppliedIndex())
	}
	if d, ok, err := readDurable(s.db.Opts().Dir); err != nil || !ok || d.index != 10 {
		t.Fatalf("durable record %+v (%v, %v), want index 10", d, ok, err)
	}
	if synced, err := s.Sync(); err != nil || synced != 11 {
		t.Fatalf("second sync covered %d (%v), want 11", synced, err)
	}
}

// TestCompactionTrimsHistory checks that the event log (which is the
// revision index too) below the compact revision is gone, and nothing at or
// above it.
func TestCompactionTrimsHistory(t *testing.T) {
	h := newHarness(t, 5)
	for range 50 {
		h.applyOps(txnOf(core.TxnOp{Kind: core.OpPut, Key: []byte("k"), Value: []byte("v")}))
	}
	rev := h.meta().Rev
	h.applyOps(core.Op{Compact: &core.Compact{Rev: rev - 10}}, core.Op{Compact: &core.Compact{Rev: rev - 5}})
	v, err := h.s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, p := range []byte{prefixEventLog} {
		var revs []int64
		err := v.scan([]byte{p}, []byte{p}, nil, func(k []byte, _ *badger.Item) (bool, error) {
			revs = append(revs, int64(getUint64(k)))
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != 6 || revs[0] != rev-5 || revs[5] != rev {
			t.Fatalf("records %q left: revisions %v, want %d..%d", p, revs, rev-5, rev)
		}
	}
}

// TestOpenViewHoldsHistory compacts past a View's revision while the View is
// open and makes Badger compact its tables: the View must still read its
// revision, and the discard timestamp must rise once it is closed.
func TestOpenViewHoldsHistory(t *testing.T) {
	h := newHarness(t, 6)
	value := bytes.Repeat([]byte("x"), 2048)
	put := func(k string) core.Op { return txnOf(core.TxnOp{Kind: core.OpPut, Key: []byte(k), Value: value}) }
	for i := range 600 {
		h.applyOps(put([]string{"a", "b", "c"}[i%3]), put("d"))
	}
	rev := h.meta().Rev / 2
	v, err := h.s.At(rev)
	if err != nil {
		t.Fatal(err)
	}
	h.applyOps(core.Op{Compact: &core.Compact{Rev: h.meta().Rev}})
	if _, err := h.s.At(rev); !errors.Is(err, core.ErrCompacted) {
		t.Fatalf("At(%d) after compaction: %v", rev, err)
	}
	if err := h.s.db.Flatten(2); err != nil {
		t.Fatal(err)
	}
	rec := h.at[rev]
	for _, k := range []string{"a", "b", "c", "d"} {
		n, err := v.Node([]byte(k))
		if err != nil || !sameNode(n, rec.nodes[k]) {
			t.Fatalf("open view at %d: Node(%q) = %+v (%v), want %+v", rev, k, n, err, rec.nodes[k])
		}
	}
	// The discard timestamp never passes what Sync made durable.
	if _, err := h.s.Sync(); err != nil {
		t.Fatal(err)
	}
	held := h.s.hist.set
	v.Close()
	if h.s.hist.set <= held || h.s.hist.set != h.s.hist.want {
		t.Fatalf("discard timestamp %d -> %d after the view closed, want %d", held, h.s.hist.set, h.s.hist.want)
	}
}
