package store

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/januskv/janus/core"
)

const benchKeys = 10000

// benchCacheSize is Config.CacheSize for the Apply benchmarks, to compare
// the record cache's sizes (-1: off).
var benchCacheSize = flag.Int64("bench.cachesize", 0, "Config.CacheSize for the Apply benchmarks")

func benchKey(i int) []byte { return fmt.Appendf(nil, "bench/key/%06d", i%benchKeys) }

func putEntry(index uint64, key, value []byte) core.Entry {
	return core.Entry{Index: index, Time: int64(index), Op: txnOf(core.TxnOp{Kind: core.OpPut, Key: key, Value: value})}
}

// BenchmarkApply applies puts of 256-byte values in groups of 1, 16 and 256
// entries; one op is one entry. The keys cycle through 10,000, so after the
// first pass every put overwrites a key.
func BenchmarkApply(b *testing.B) {
	value := bytes.Repeat([]byte("v"), 256)
	benchApply(b, nil, func(index uint64) core.Entry {
		return putEntry(index, benchKey(int(index)), value)
	})
}

// BenchmarkApplyMixed applies puts of 256-byte values to keys drawn at
// random from 100,000, so groups mix new keys with overwrites of keys last
// written long ago (no longer in Badger's memtable).
func BenchmarkApplyMixed(b *testing.B) {
	value := bytes.Repeat([]byte("v"), 256)
	rng := rand.New(rand.NewPCG(3, 4))
	benchApply(b, nil, func(index uint64) core.Entry {
		return putEntry(index, fmt.Appendf(nil, "bench/mixed/%08d", rng.IntN(100000)), value)
	})
}

// BenchmarkApplyCreate applies ZooKeeper creates of 256-byte nodes under one
// parent, as the create workload does: each writes the node, a child index
// entry and the parent's Dir record.
func BenchmarkApplyCreate(b *testing.B) {
	value := bytes.Repeat([]byte("v"), 256)
	setup := []core.Op{txnOf(core.TxnOp{Kind: core.OpCreate, Key: []byte("/bench"), Value: []byte{}})}
	benchApply(b, setup, func(index uint64) core.Entry {
		return core.Entry{Index: index, Time: int64(index), Op: txnOf(core.TxnOp{
			Kind: core.OpCreate, Key: fmt.Appendf(nil, "/bench/node-%010d", index), Value: value,
		})}
	})
}

// benchApply applies the setup ops, then entries made by next in groups of
// 1, 16 and 256; one op is one entry.
func benchApply(b *testing.B, setup []core.Op, next func(index uint64) core.Entry) {
	for _, group := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("group=%d", group), func(b *testing.B) {
			s, err := Open(Config{Dir: b.TempDir(), CacheSize: *benchCacheSize})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var index uint64
			for _, op := range setup {
				index++
				res, _, err := s.Apply([]core.Entry{{Index: index, Op: op}})
				if err != nil || res[0].Err != nil {
					b.Fatalf("setup: %v %v", err, res[0].Err)
				}
			}
			entries := make([]core.Entry, 0, group)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += len(entries) {
				entries = entries[:0]
				for range min(group, b.N-done) {
					index++
					entries = append(entries, next(index))
				}
				res, _, err := s.Apply(entries)
				if err != nil {
					b.Fatal(err)
				}
				if r := res[0]; r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			// Closing Badger flushes its memtables: not part of applying.
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkRangeLatest opens a latest View and reads 100 consecutive keys
// from a random start out of 10,000.
func BenchmarkRangeLatest(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := bytes.Repeat([]byte("v"), 256)
	var entries []core.Entry
	for i := range benchKeys {
		entries = append(entries, putEntry(uint64(i+1), benchKey(i), value))
		if len(entries) == 256 || i == benchKeys-1 {
			if _, _, err := s.Apply(entries); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for range b.N {
		v, err := s.Latest()
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		err = v.Range(benchKey(rng.IntN(benchKeys-100)), nil, func(*core.Node) bool {
			n++
			return n < 100
		})
		v.Close()
		if err != nil || n != 100 {
			b.Fatalf("range read %d nodes: %v", n, err)
		}
	}
}
