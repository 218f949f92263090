package store

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/januskv/janus/core"
)

var hashSeed = flag.Uint64("store.hash-seed", 0, "seed of TestStateHash (0: a fixed default)")

func latestHash(t *testing.T, s *Store) uint64 {
	t.Helper()
	v, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	h, err := v.StateHash(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Config{Dir: t.TempDir(), MemTableSize: 1 << 20, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStateHash applies one random log to stores that group it differently
// (so their Meta and Dir records carry different Badger versions) and to a
// snapshot of one of them: at every index they all reach, the hashes agree.
// A store that applied one entry with a different value disagrees from then
// on.
func TestStateHash(t *testing.T) {
	seed := *hashSeed
	if seed == 0 {
		seed = 11
	}
	t.Logf("seed %d (rerun with -store.hash-seed=%d)", seed, seed)
	mem := core.NewMemState()
	gen := newEntryGen(seed, mem)
	var entries []core.Entry
	for range 800 {
		e := gen.next()
		if _, _, err := mem.ApplyEntry(&e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	// The damaged store puts another value under a key no generated op
	// touches, so the difference stays.
	damage := len(entries) / 2
	entries[damage].Op = core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("\x01hashed"), Value: []byte("good")}}}}
	bad := make([]core.Entry, len(entries))
	copy(bad, entries)
	bad[damage].Op = core.Op{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("\x01hashed"), Value: []byte("evil")}}}}

	single, grouped, damaged := openStore(t), openStore(t), openStore(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	// Both grouped stores end a group exactly where single checks.
	for i := 0; i < len(entries); {
		n := 1 + rng.IntN(20)
		end := min(i+n, len(entries))
		for j := i; j < end; j++ {
			if _, _, err := single.Apply(entries[j : j+1]); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := grouped.Apply(entries[i:end]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := damaged.Apply(bad[i:end]); err != nil {
			t.Fatal(err)
		}
		i = end
		hs, hg, hd := latestHash(t, single), latestHash(t, grouped), latestHash(t, damaged)
		if hs != hg {
			t.Fatalf("index %d: hash %x applying one entry at a time, %x in groups", end, hs, hg)
		}
		if (hd != hs) != (end > damage) {
			t.Fatalf("index %d: damaged store's hash %x, healthy %x (damage at entry %d)", end, hd, hs, damage)
		}
	}
	var snap bytes.Buffer
	if _, err := grouped.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	restored := openStore(t)
	if err := restored.RestoreSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if hr, hs := latestHash(t, restored), latestHash(t, single); hr != hs {
		t.Fatalf("restored snapshot hashes %x, its source %x", hr, hs)
	}
}
