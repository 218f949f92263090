package store

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// BenchmarkLayout measures what keeping history apart from the latest
// state would save, on Badger alone (not the store): b.N puts of varied
// 256-byte values over -bench.keys keys in groups of 16, each put writing
// its node record at the group's version and a small event record, each
// group an applied-index record, with the store's Badger options.
//
//   - one: a single Badger, every version of a node record kept (no
//     compaction by a client moves the discard timestamp), as the store
//     keeps its history today.
//   - split: the latest state in one Badger whose discard timestamp
//     follows the writes (compaction drops replaced versions), and the
//     history in another, keyed by revision then key, so that it is only
//     ever appended to: each record is written twice.
//   - pointer: as split, but the latest state holds only the revision of
//     each key's record, which the history holds once.
//   - vlog: as one, with the node records' values in Badger's value log
//     (a 64-byte value threshold), so that compaction moves pointers.
//   - history: the history alone, as a store that keeps the latest state
//     in memory (with checkpoints, not measured) would write it.
//
// It reports the process's CPU per put (Badger's flushes and compactions
// included) and the slowest of 50 equal slices against the median one.
// Run it with -benchtime=1000000x or more, so that both layouts compact.
func BenchmarkLayout(b *testing.B) {
	for _, layout := range []string{"one", "vlog", "split", "pointer", "history"} {
		b.Run(layout, func(b *testing.B) { benchLayout(b, layout) })
	}
}

func benchLayout(b *testing.B, layout string) {
	split := layout == "split" || layout == "pointer" || layout == "history"
	pointer, historyOnly := layout == "pointer", layout == "history"
	threshold := valueThreshold(defaultMemTableSize)
	if layout == "vlog" {
		threshold = 64
	}
	open := func() *badger.DB {
		opts := badger.DefaultOptions(b.TempDir()).
			WithSyncWrites(false).
			WithNumVersionsToKeep(1).
			WithDetectConflicts(false).
			WithMetricsEnabled(false).
			WithMemTableSize(defaultMemTableSize).
			WithValueThreshold(threshold).
			WithNumMemtables(3).
			WithBlockCacheSize(defaultBlockCacheSize).
			WithBaseLevelSize(baseLevelSize).
			WithNumCompactors(2).
			WithNumGoroutines(2).
			WithLogger(nil)
		db, err := badger.OpenManaged(opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	latest := open()
	history := latest
	if split {
		history = open()
	}
	rng := rand.New(rand.NewPCG(5, 6))
	values := make([][]byte, 64)
	for i := range values {
		values[i] = make([]byte, 256+40) // a node record: the value and its metadata
		for j := range values[i] {
			values[i][j] = byte('0' + rng.IntN(75))
		}
	}
	const group = 16
	write := func(db *badger.DB, fill func(wb *badger.WriteBatch)) {
		if db == latest && historyOnly {
			return
		}
		wb := db.NewManagedWriteBatch()
		fill(wb)
		if err := wb.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	run := startSustained(b)
	var rev uint64
	for done := 0; done < b.N; {
		n := min(group, b.N-done)
		first := rev + 1
		rev += uint64(n)
		ts := rev
		write(latest, func(wb *badger.WriteBatch) {
			for r := first; r <= rev; r++ {
				key := fmt.Appendf(nil, "n/bench/key/%06d", int(r)%*benchSustainedKeys)
				val := values[r%64]
				if pointer {
					val = binary.BigEndian.AppendUint64(nil, r)
				}
				mustBench(b, wb.SetEntryAt(badger.NewEntry(key, val), ts))
				if !split {
					mustBench(b, wb.SetEntryAt(badger.NewEntry(binary.BigEndian.AppendUint64([]byte("e/"), r), key[2:]), ts))
				}
			}
			mustBench(b, wb.SetEntryAt(badger.NewEntry([]byte("m/applied"), binary.BigEndian.AppendUint64(nil, ts)), ts))
		})
		if split {
			write(history, func(wb *badger.WriteBatch) {
				for r := first; r <= rev; r++ {
					key := fmt.Appendf(binary.BigEndian.AppendUint64([]byte("h/"), r), "bench/key/%06d", int(r)%*benchSustainedKeys)
					mustBench(b, wb.SetEntryAt(badger.NewEntry(key, values[r%64]), ts))
				}
				mustBench(b, wb.SetEntryAt(badger.NewEntry([]byte("m/applied"), binary.BigEndian.AppendUint64(nil, ts)), ts))
			})
			latest.SetDiscardTs(ts)
		}
		run.wrote(done, done+n)
		done += n
	}
	run.report()
}

func mustBench(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
