package store

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

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

// BenchmarkApplySetData applies ZooKeeper setData of 256-byte values to
// 10,000 leaf nodes in turn, as the setData workload does.
func BenchmarkApplySetData(b *testing.B) {
	value := bytes.Repeat([]byte("v"), 256)
	path := func(i int) []byte { return fmt.Appendf(nil, "/bench/node-%06d", i%benchKeys) }
	setup := []core.Op{txnOf(core.TxnOp{Kind: core.OpCreate, Key: []byte("/bench"), Value: []byte{}})}
	for i := range benchKeys {
		setup = append(setup, txnOf(core.TxnOp{Kind: core.OpCreate, Key: path(i), Value: value}))
	}
	benchApply(b, setup, func(index uint64) core.Entry {
		return core.Entry{Index: index, Time: int64(index), Op: txnOf(core.TxnOp{
			Kind: core.OpSetData, Key: path(int(index)), Value: value, ExpectedVersion: -1,
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
	rangeLatest(b, s, rng)
}

var (
	benchSustainedKeys = flag.Int("bench.keys", benchKeys, "distinct keys BenchmarkApplySustained writes")
	benchBadger        = flag.String("bench.badger", "", "Badger options for BenchmarkApplySustained: comma-separated name=value of l0, l0stall, base (MiB), mult, memtables, memtable (MiB), compactors, compression (none, snappy, zstd), blockcache (MiB)")
)

// BenchmarkApplySustained applies puts of 256-byte values in groups of 16
// for b.N entries (run it with -benchtime=300000x or more, so that
// Badger flushes memtables and compacts), as a put workload does. Beside
// the time per entry it reports the process's CPU time per entry, which
// counts Badger's flushes and compactions as they happen, and the slowest
// of 50 equal slices of the run against the median slice ("slowest/median"),
// which is how much a stall of the write path (a write waiting for a
// memtable flush, or compaction taking the CPU) slows a stretch of
// writes.
func BenchmarkApplySustained(b *testing.B) {
	tune, err := parseBadgerTuning(*benchBadger)
	if err != nil {
		b.Fatal(err)
	}
	// Varied printable values, as the bench tool writes (one per client),
	// so that Badger's compression does not shrink tables the way a
	// repeated byte would.
	rng := rand.New(rand.NewPCG(5, 6))
	values := make([][]byte, 64)
	for i := range values {
		values[i] = make([]byte, 256)
		for j := range values[i] {
			values[i][j] = byte('0' + rng.IntN(75))
		}
	}
	cfg := Config{Dir: b.TempDir(), CacheSize: *benchCacheSize, tuneBadger: tune}
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const group = 16
	var index uint64
	entries := make([]core.Entry, 0, group)
	run := startSustained(b)
	for done := 0; done < b.N; {
		entries = entries[:0]
		for range min(group, b.N-done) {
			index++
			entries = append(entries, putEntry(index, fmt.Appendf(nil, "bench/key/%06d", int(index)%*benchSustainedKeys), values[index%64]))
		}
		if _, _, err := s.Apply(entries); err != nil {
			b.Fatal(err)
		}
		run.wrote(done, done+len(entries))
		done += len(entries)
	}
	run.report()
}

// sustainedRun times a sustained write benchmark: it reports the
// process's CPU time per entry (Badger's flushes and compactions
// included), entries per second, and the slowest of 50 equal slices of
// the run against the median slice.
type sustainedRun struct {
	b                 *testing.B
	sliceLen          int
	cpu0              time.Duration
	start, sliceStart time.Time
	took              []time.Duration
}

// startSustained starts the clock; call it right before the loop.
func startSustained(b *testing.B) *sustainedRun {
	const parts = 50
	b.ReportAllocs()
	r := &sustainedRun{b: b, sliceLen: max(b.N/parts, 1), cpu0: processCPU(b)}
	b.ResetTimer()
	r.start, r.sliceStart = time.Now(), time.Now()
	return r
}

// wrote records that the entries from before to after are written.
func (r *sustainedRun) wrote(before, after int) {
	if after/r.sliceLen != before/r.sliceLen {
		now := time.Now()
		r.took = append(r.took, now.Sub(r.sliceStart))
		r.sliceStart = now
	}
}

// report stops the clock and reports the metrics.
func (r *sustainedRun) report() {
	b := r.b
	b.StopTimer()
	elapsed := time.Since(r.start)
	cpu := processCPU(b) - r.cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "entries/s")
	if len(r.took) > 2 {
		sorted := slices.Clone(r.took)
		slices.Sort(sorted)
		b.ReportMetric(float64(sorted[len(sorted)-1])/float64(sorted[len(sorted)/2]), "slowest/median")
	}
}

// badgerSetters are -bench.badger's numeric options; sizes are in MiB.
var badgerSetters = map[string]func(badger.Options, int) badger.Options{
	"l0":         func(o badger.Options, n int) badger.Options { return o.WithNumLevelZeroTables(n) },
	"l0stall":    func(o badger.Options, n int) badger.Options { return o.WithNumLevelZeroTablesStall(n) },
	"base":       func(o badger.Options, n int) badger.Options { return o.WithBaseLevelSize(int64(n) << 20) },
	"basetable":  func(o badger.Options, n int) badger.Options { return o.WithBaseTableSize(int64(n) << 20) },
	"mult":       func(o badger.Options, n int) badger.Options { return o.WithLevelSizeMultiplier(n) },
	"memtables":  func(o badger.Options, n int) badger.Options { return o.WithNumMemtables(n) },
	"memtable":   func(o badger.Options, n int) badger.Options { return o.WithMemTableSize(int64(n) << 20) },
	"compactors": func(o badger.Options, n int) badger.Options { return o.WithNumCompactors(n) },
	"blockcache": func(o badger.Options, n int) badger.Options { return o.WithBlockCacheSize(int64(n) << 20) },
}

// parseBadgerTuning turns -bench.badger into Config.tuneBadger.
func parseBadgerTuning(spec string) (func(badger.Options) badger.Options, error) {
	if spec == "" {
		return nil, nil
	}
	var sets []func(badger.Options) badger.Options
	for _, kv := range strings.Split(spec, ",") {
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("bench.badger: %q is not name=value", kv)
		}
		if name == "compression" {
			c, ok := map[string]options.CompressionType{"none": options.None, "snappy": options.Snappy, "zstd": options.ZSTD}[val]
			if !ok {
				return nil, fmt.Errorf("bench.badger: compression %q", val)
			}
			sets = append(sets, func(o badger.Options) badger.Options { return o.WithCompression(c) })
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			return nil, fmt.Errorf("bench.badger: %s: %w", name, err)
		}
		set, ok := badgerSetters[name]
		if !ok {
			return nil, fmt.Errorf("bench.badger: unknown option %q", name)
		}
		sets = append(sets, func(o badger.Options) badger.Options { return set(o, n) })
	}
	return func(o badger.Options) badger.Options {
		for _, set := range sets {
			o = set(o)
		}
		return o
	}, nil
}

// processCPU returns the user and system time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchWritten = flag.Int("bench.written", 600000, "puts BenchmarkRangeAfterWrites applies before it reads")

// BenchmarkRangeAfterWrites applies -bench.written puts of varied 256-byte
// values over 10,000 keys (with -bench.badger's options), then times
// reads of 100 consecutive keys of the latest state while Badger still
// has tables waiting in level 0, which is what a read pays for compacting
// level 0 less often. It reports the level-0 tables found when the reads
// started.
func BenchmarkRangeAfterWrites(b *testing.B) {
	tune, err := parseBadgerTuning(*benchBadger)
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(Config{Dir: b.TempDir(), tuneBadger: tune})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	value := make([]byte, 256)
	var entries []core.Entry
	for i := range *benchWritten {
		for j := range value {
			value[j] = byte('0' + rng.IntN(75))
		}
		entries = append(entries, putEntry(uint64(i+1), benchKey(i), bytes.Clone(value)))
		if len(entries) == 256 || i == *benchWritten-1 {
			if _, _, err := s.Apply(entries); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	l0 := 0
	for _, t := range s.db.Tables() {
		if t.Level == 0 {
			l0++
		}
	}
	b.ResetTimer()
	rangeLatest(b, s, rng)
	b.ReportMetric(float64(l0), "L0-tables")
}

// rangeLatest is the timed loop of the range benchmarks: b.N reads of 100
// consecutive keys of the latest state, from random starts.
func rangeLatest(b *testing.B, s *Store, rng *rand.Rand) {
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

// BenchmarkTreeNodeLatest reads what a ZooKeeper getData reads, a View of
// the latest state and core.TreeNode of one of 10,000 nodes under one
// parent (its node and its absent Dir), with the record cache on
// (-bench.cachesize 0, the default size) or off (-1).
func BenchmarkTreeNodeLatest(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), CacheSize: *benchCacheSize})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	path := func(i int) []byte { return fmt.Appendf(nil, "/bench/key-%06d", i%benchKeys) }
	if _, _, err := s.Apply([]core.Entry{{Index: 1, Time: 1, Op: txnOf(core.TxnOp{Kind: core.OpCreate, Key: []byte("/bench"), Value: []byte{}})}}); err != nil {
		b.Fatal(err)
	}
	applyLeafCreates(b, s, 1, benchKeys, path)
	read := func(i int) {
		v, err := s.Latest()
		if err != nil {
			b.Fatal(err)
		}
		n, _, err := core.TreeNode(v, path(i))
		v.Close()
		if err != nil || n == nil {
			b.Fatalf("read %s: %v %v", path(i), n, err)
		}
	}
	for i := range benchKeys {
		read(i) // the first read of each key fills the cache
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		read(i * 7919)
		i++
	}
}

// applyLeafCreates applies creates of n nodes of 256-byte values at path(i),
// with ZooKeeper's open ACL as the bench tool's clients create them, in
// groups of 256 from index+1 on.
func applyLeafCreates(tb testing.TB, s *Store, index uint64, n int, path func(int) []byte) {
	tb.Helper()
	value := bytes.Repeat([]byte("v"), 256)
	openACL := []core.ACL{{Perms: core.PermAll, ID: core.ID{Scheme: "world", ID: "anyone"}}}
	var entries []core.Entry
	for i := range n {
		index++
		entries = append(entries, core.Entry{Index: index, Time: int64(index), Op: txnOf(core.TxnOp{Kind: core.OpCreate, Key: path(i), Value: value, Create: &core.CreateOptions{ACL: openACL}})})
	}
	for len(entries) > 0 {
		k := min(len(entries), 256)
		if _, _, err := s.Apply(entries[:k]); err != nil {
			tb.Fatal(err)
		}
		entries = entries[k:]
	}
}
