package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/januskv/janus/core"
)

const benchKeys = 10000

func benchKey(i int) []byte { return fmt.Appendf(nil, "bench/key/%06d", i%benchKeys) }

func putEntry(index uint64, key, value []byte) core.Entry {
	return core.Entry{Index: index, Time: int64(index), Op: txnOf(core.TxnOp{Kind: core.OpPut, Key: key, Value: value})}
}

// BenchmarkApply applies puts of 256-byte values in groups of 1, 16 and 256
// entries; one op is one entry.
func BenchmarkApply(b *testing.B) {
	value := bytes.Repeat([]byte("v"), 256)
	for _, group := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("group=%d", group), func(b *testing.B) {
			s, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			entries := make([]core.Entry, 0, group)
			var index uint64
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for done := 0; done < b.N; done += len(entries) {
				entries = entries[:0]
				for range min(group, b.N-done) {
					index++
					entries = append(entries, putEntry(index, benchKey(int(index)), value))
				}
				if _, _, err := s.Apply(entries); err != nil {
					b.Fatal(err)
				}
			}
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
