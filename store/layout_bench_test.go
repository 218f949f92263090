package store

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// BenchmarkLayout measures what keeping history apart from the latest
// state would save, and what sending records to the value log saves, on
// Badger alone (not the store): b.N puts of varied 296-byte node records
// over -bench.keys keys in groups of 16, each put writing its node record
// at the group's version and a small event record, each group an
// applied-index record, with the store's Badger options.
//
//   - one: a single Badger, every version of a node record kept (no
//     compaction by a client moves the discard timestamp), the records in
//     the LSM tree (treeThreshold): the store before its value threshold
//     came down.
//   - vlog: as one, with the store's value threshold, which sends the
//     records to the value log, so that compaction moves pointers: the
//     store as built.
//   - split: the latest state in one Badger whose discard timestamp
//     follows the writes (compaction drops replaced versions), and the
//     history in another, keyed by revision then key, so that it is only
//     ever appended to: each record is written twice.
//   - pointer: as split, but the latest state holds only the revision of
//     each key's record, which the history holds once.
//   - history: the history alone, as a store that keeps the latest state
//     in memory (with checkpoints, not measured) would write it.
//
// All but vlog keep the records in the tree. It reports the process's CPU
// per put (Badger's flushes and compactions included) and the slowest of
// 50 equal slices against the median one. Run it with -benchtime=1000000x
// or more, so that every layout compacts.
func BenchmarkLayout(b *testing.B) {
	for _, layout := range []string{"one", "vlog", "split", "pointer", "history"} {
		b.Run(layout, func(b *testing.B) { benchLayout(b, layout) })
	}
}

// treeThreshold keeps BenchmarkLayout's records in the LSM tree: the
// store's value threshold before records went to the value log.
const treeThreshold = 64 << 10

func benchLayout(b *testing.B, layout string) {
	split := layout == "split" || layout == "pointer" || layout == "history"
	pointer, historyOnly := layout == "pointer", layout == "history"
	open := func() *badger.DB {
		opts := badgerOptions(b.TempDir(), defaultMemTableSize).
			WithBlockCacheSize(defaultBlockCacheSize).
			WithValueLogFileSize(valueLogFileSize).
			WithLogger(nil)
		if layout != "vlog" {
			opts = opts.WithValueThreshold(treeThreshold)
		}
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
