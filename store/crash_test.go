package store

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

var storeSeed = flag.Uint64("store.seed", 0, "seed for the store's crash tests (0: pick one and log it)")

// testSeed returns -store.seed, or a fresh seed, and logs it so that a
// failure replays.
func testSeed(t testing.TB) uint64 {
	seed := *storeSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -store.seed=%d)", seed, seed)
	return seed
}

// walHeaderSize is the bytes a Badger memtable log starts with (a key id
// and an IV) before its first record (badger's vlogHeaderSize).
const walHeaderSize = 20

// walRecord is one record of a Badger memtable or value log, as Badger's
// logFile encodes it: meta(1) userMeta(1) uvarint(klen) uvarint(vlen)
// uvarint(expiresAt) key value crc32c(4, big-endian, of all before it),
// the key ending in its 8-byte version.
type walRecord struct {
	off, end int
	key      []byte // without the version
	version  uint64
	meta     byte
	value    []byte
}

// walRecords parses a memtable or value log up to where Badger's replay
// stops: a zero header, a record running past the end, or a checksum
// mismatch.
func walRecords(b []byte) []walRecord {
	var out []walRecord
	off := walHeaderSize
	for off+2 < len(b) {
		p := off + 2
		klen, n := binary.Uvarint(b[p:])
		if n <= 0 {
			break
		}
		p += n
		vlen, n := binary.Uvarint(b[p:])
		if n <= 0 {
			break
		}
		p += n
		_, n = binary.Uvarint(b[p:])
		if n <= 0 {
			break
		}
		p += n
		if klen == 0 {
			break // a zeroed header: the end of what was written
		}
		end := p + int(klen) + int(vlen) + crc32.Size
		if klen < 8 || end > len(b) {
			break
		}
		if crc32.Checksum(b[off:end-crc32.Size], crcTable) != binary.BigEndian.Uint32(b[end-crc32.Size:end]) {
			break
		}
		key := b[p : p+int(klen)]
		out = append(out, walRecord{
			off: off, end: end,
			key:     bytes.Clone(key[:len(key)-8]),
			version: math.MaxUint64 - binary.BigEndian.Uint64(key[len(key)-8:]),
			meta:    b[off],
			value:   b[p+int(klen) : end-crc32.Size],
		})
		off = end
	}
	return out
}

// dirImage is a copy of a Badger directory taken while Badger had it open:
// each file's bytes up to its last non-zero one, and its size (memtable
// and value logs are mostly zeros that the file system need not store).
type dirImage map[string]fileImage

type fileImage struct {
	data []byte
	size int64
}

func takeImage(t testing.TB, dir string) dirImage {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	img := dirImage{}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "LOCK" || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue // a memtable log Badger removed meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		n := len(b)
		for n > 0 && b[n-1] == 0 {
			n--
		}
		if strings.HasSuffix(e.Name(), ".mem") || strings.HasSuffix(e.Name(), ".vlog") {
			// The last record may end in zero bytes (its checksum, say):
			// they are part of it. Cutting them off made the last record
			// unreadable to walRecords, so no cut kept it (one seed in
			// a few hundred).
			if recs := walRecords(b); len(recs) > 0 {
				n = max(n, recs[len(recs)-1].end)
			}
		}
		img[e.Name()] = fileImage{data: b[:n], size: int64(len(b))}
	}
	return img
}

// memFiles returns the image's memtable logs, oldest first.
func (img dirImage) memFiles() []string {
	var out []string
	for name := range img {
		if strings.HasSuffix(name, ".mem") {
			out = append(out, name)
		}
	}
	slices.Sort(out) // fixed-width file ids
	return out
}

// write puts the image into dir, each file cut to cuts[name] bytes when
// given (a negative cut leaves the file out).
func (img dirImage) write(t testing.TB, dir string, cuts map[string]int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, f := range img {
		data := f.data
		if c, ok := cuts[name]; ok {
			if c < 0 {
				continue
			}
			data = data[:min(c, len(data))]
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, f.size); err != nil {
			t.Fatal(err)
		}
	}
}

// scratchDir returns a directory removed when the test ends, in memory
// where the system offers it: the crash tests open hundreds of stores, and
// their fsyncs are not what the tests are about (what survives a crash is
// modelled by the cut images).
func scratchDir(t testing.TB) string {
	t.Helper()
	if d, err := os.MkdirTemp("/dev/shm", "janus-store-crash-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

// dumpStore returns every record readable at the store's applied index,
// key to value: the whole state (nodes, Dir records, child index, leases,
// lease attachments, meta, revision index) and the event log.
func dumpStore(t testing.TB, s *Store) map[string]string {
	t.Helper()
	txn := s.db.NewTransactionAt(s.AppliedIndex(), false)
	defer txn.Discard()
	it := txn.NewIterator(badger.DefaultIteratorOptions)
	defer it.Close()
	out := map[string]string{}
	for it.Rewind(); it.Valid(); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			t.Fatal(err)
		}
		out[string(it.Item().KeyCopy(nil))] = string(v)
	}
	return out
}

// diffDumps describes how two dumps differ, "" if they do not.
func diffDumps(got, want map[string]string) string {
	var b strings.Builder
	n := 0
	for _, k := range slices.Sorted(mapKeys(want, got)) {
		g, gok := got[k]
		w, wok := want[k]
		if gok == wok && g == w {
			continue
		}
		if n++; n <= 8 {
			fmt.Fprintf(&b, "\n  %q: got %q (present %v), want %q (present %v)", k, trunc(g), gok, trunc(w), wok)
		}
	}
	if n > 8 {
		fmt.Fprintf(&b, "\n  ... %d records differ", n)
	}
	return b.String()
}

func mapKeys(ms ...map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// crashScenario is a store with history whose last groups are the ones a
// crash cuts: it remembers every group applied, and the store's whole
// state after each.
type crashScenario struct {
	h      *harness
	groups [][]core.Entry
	dumps  map[uint64]map[string]string // applied index -> dumpStore then
}

func newCrashScenario(t *testing.T, seed uint64, memTable int64) *crashScenario {
	h := newHarness(t, seed)
	h.cfg.MemTableSize = memTable
	h.reopen()
	return &crashScenario{h: h, dumps: map[uint64]map[string]string{0: dumpStore(t, h.s)}}
}

// apply applies one group to the store and the MemState, checks them
// against each other and remembers the store's state.
func (c *crashScenario) apply(entries []core.Entry, results []*core.Result, batches []*core.Batch) {
	c.h.t.Helper()
	c.h.applyGroup(entries, results, batches)
	c.h.checkLatest()
	c.groups = append(c.groups, entries)
	c.dumps[c.h.s.AppliedIndex()] = dumpStore(c.h.t, c.h.s)
}

func (c *crashScenario) random(n int) { c.apply(c.h.generate(n)) }

func (c *crashScenario) ops(ops ...core.Op) {
	h := c.h
	i := 0
	c.apply(h.generateFrom(len(ops), func() core.Entry {
		h.gen.index++
		h.gen.time++
		i++
		return core.Entry{Index: h.gen.index, Time: h.gen.time, Op: ops[i-1]}
	}))
}

// after returns the entries above index, in order.
func (c *crashScenario) after(index uint64) []core.Entry {
	var out []core.Entry
	for _, g := range c.groups {
		for _, e := range g {
			if e.Index > index {
				out = append(out, e)
			}
		}
	}
	return out
}

// recoverAndCheck opens the store written into dir as Open would after a
// crash on a system whose boot is named boot, checks that its state is
// exactly the one after some group, replays the rest of the entries as
// the consensus log would (in groups of its own size), and checks the
// final state. It returns the applied index recovered.
func (c *crashScenario) recoverAndCheck(t *testing.T, dir, boot string, replayGroup int, what string) uint64 {
	t.Helper()
	s, err := open(Config{Dir: dir, MemTableSize: c.h.cfg.MemTableSize, BlockCacheSize: 1 << 20}, boot)
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	defer s.Close()
	got := s.AppliedIndex()
	want, ok := c.dumps[got]
	if !ok {
		t.Fatalf("%s: recovered applied index %d is not the end of a group", what, got)
	}
	if d := diffDumps(dumpStore(t, s), want); d != "" {
		t.Fatalf("%s: state recovered at applied index %d differs from the state then:%s", what, got, d)
	}
	rest := c.after(got)
	for len(rest) > 0 {
		n := min(replayGroup, len(rest))
		if _, _, err := s.Apply(rest[:n]); err != nil {
			t.Fatalf("%s: replay from %d: %v", what, rest[0].Index, err)
		}
		rest = rest[n:]
	}
	final := c.h.s.AppliedIndex()
	if s.AppliedIndex() != final {
		t.Fatalf("%s: replayed to %d, want %d", what, s.AppliedIndex(), final)
	}
	if d := diffDumps(dumpStore(t, s), c.dumps[final]); d != "" {
		t.Fatalf("%s: state after replaying %d..%d differs from the store that did not crash:%s", what, got+1, final, d)
	}
	return got
}

// crashWindow applies the groups a crash test cuts: leases with keys
// attached, ZooKeeper creates (Dir records rewritten several times in one
// group, the child index, an ephemeral node), a group bigger than one
// Badger transaction, a compaction, and revokes that delete attached keys.
// Every group changes core.Meta.
const windowGroups = 5

func (c *crashScenario) crashWindow(bigValue int) {
	put := func(k string, v []byte, lease int64) core.Op {
		return txnOf(core.TxnOp{Kind: core.OpPut, Key: []byte(k), Value: v, Lease: lease})
	}
	create := func(k string, opts *core.CreateOptions) core.Op {
		return txnOf(core.TxnOp{Kind: core.OpCreate, Key: []byte(k), Value: []byte("v"), Create: opts})
	}
	persistent := &core.CreateOptions{Mode: core.ModePersistent}
	c.ops(
		core.Op{LeaseGrant: &core.LeaseGrant{ID: 100, TTL: 60}},
		core.Op{LeaseGrant: &core.LeaseGrant{ID: 101, TTL: 60, Session: &core.Session{TimeoutMs: 4000, Password: []byte("pw")}}},
	)
	c.ops(
		put("lk/1", []byte("a"), 100),
		put("lk/2", []byte("b"), 100),
		create("/cc", persistent),
		create("/cc/e1", &core.CreateOptions{Mode: core.ModePersistent, Lease: 101}),
		create("/cc/s-", &core.CreateOptions{Mode: core.ModePersistent, Sequential: true}),
		create("/cc/s-", &core.CreateOptions{Mode: core.ModePersistent, Sequential: true}),
	)
	var big []core.Op
	for i := range 12 {
		big = append(big, put(fmt.Sprintf("big/%02d", i), bytes.Repeat([]byte{byte('a' + i)}, bigValue), 0))
	}
	big = append(big, create("/cc/after-big", persistent))
	c.ops(big...)
	c.ops(core.Op{Compact: &core.Compact{Rev: c.h.meta().Rev - 3}}, put("after-compact", []byte("x"), 0))
	c.ops(core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 100}}, core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 101}}, put("z", []byte("z"), 0))
}

// TestCrashCut checks that a crash of the process anywhere in the writing
// of the last groups leaves whole groups: the store is copied while open,
// its memtable log is cut at every record boundary of those groups (and
// inside every record), and each copy must reopen at the end of some group
// with exactly that group's state, and replay to the same final state.
// The process's page cache survives such a crash, so everything before the
// cut is there.
func TestCrashCut(t *testing.T) {
	seed := testSeed(t)
	const memTable = 2 << 20
	c := newCrashScenario(t, seed, memTable)
	for c.h.gen.index < 150 {
		c.random(c.h.groupSize())
	}
	dir := c.h.cfg.Dir
	before := takeImage(t, dir)
	mems := before.memFiles()
	active := mems[len(mems)-1]
	start := walRecords(before[active].data)
	from := walHeaderSize
	if len(start) > 0 {
		from = start[len(start)-1].end
	}
	// Badger splits a write batch into transactions of at most 15% of a
	// memtable: the big group needs more than one.
	const bigValue = 40 << 10
	if 12*bigValue <= memTable*15/100 {
		t.Fatal("the big group fits one Badger transaction")
	}
	c.crashWindow(bigValue)
	img := takeImage(t, dir)
	if got := img.memFiles(); !reflect.DeepEqual(got, mems) {
		t.Fatalf("memtable logs %v became %v: a rotation would make the cuts below unlike a crash", mems, got)
	}
	recs := walRecords(img[active].data)
	var cuts []int
	for _, r := range recs {
		if r.end <= from {
			continue
		}
		cuts = append(cuts, r.off, r.off+(r.end-r.off)/2) // at the record, inside it
	}
	cuts = append(cuts, recs[len(recs)-1].end)
	if len(cuts) < 100 {
		t.Fatalf("only %d cut points", len(cuts))
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	boot := bootID()
	scratch := scratchDir(t)
	recovered := map[uint64]int{}
	for i, cut := range cuts {
		if testing.Short() && i%5 != 0 && i != len(cuts)-1 {
			continue
		}
		d := filepath.Join(scratch, "copy")
		img.write(t, d, map[string]int{active: cut})
		got := c.recoverAndCheck(t, d, boot, 1+rng.IntN(8), fmt.Sprintf("cut at byte %d of %s", cut, active))
		recovered[got]++
		os.RemoveAll(d)
		if i%100 == 0 {
			t.Logf("cut %d of %d", i, len(cuts))
		}
	}
	t.Logf("%d cut points over the last %d groups' log records; recovered applied index: cuts %v",
		len(cuts), windowGroups, recovered)
	// Every group's end, and the end before them, is reached by some cut.
	if want := windowGroups + 1; len(recovered) != want && !testing.Short() {
		t.Fatalf("the cuts recovered %d distinct applied indexes, want %d", len(recovered), want)
	}
}

// TestPowerLossCut checks what a crash of the machine leaves. After Sync,
// more groups are written; then the memtable log keeps what Sync flushed
// and any subset of the records after it that the page cache wrote back:
// the older memtable log a prefix of them, a newer one (as if Badger had
// started a new memtable) a later run, with a hole between, which a newer
// memtable's pages reaching the disk before an older one's can leave. On a
// new boot the store must reopen at exactly the index Sync returned, with
// that index's state, and replay to the same final state.
func TestPowerLossCut(t *testing.T) {
	seed := testSeed(t)
	const memTable = 2 << 20
	c := newCrashScenario(t, seed, memTable)
	for c.h.gen.index < 150 {
		c.random(c.h.groupSize())
	}
	synced, err := c.h.s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	dir := c.h.cfg.Dir
	atSync := takeImage(t, dir)
	mems := atSync.memFiles()
	active := mems[len(mems)-1]
	syncRecs := walRecords(atSync[active].data)
	syncEnd := walHeaderSize
	if len(syncRecs) > 0 {
		syncEnd = syncRecs[len(syncRecs)-1].end
	}
	const bigValue = 40 << 10
	c.crashWindow(bigValue)
	for end := c.h.gen.index + 100; c.h.gen.index < end; {
		c.random(c.h.groupSize())
	}
	img := takeImage(t, dir)
	if got := img.memFiles(); !reflect.DeepEqual(got, mems) {
		t.Fatalf("memtable logs %v became %v: a rotation would make the images below unlike a crash", mems, got)
	}
	log := img[active].data
	var above []walRecord
	for _, r := range walRecords(log) {
		if r.off >= syncEnd {
			above = append(above, r)
		}
	}
	fid, err := strconv.Atoi(strings.TrimSuffix(active, ".mem"))
	if err != nil {
		t.Fatal(err)
	}
	newer := fmt.Sprintf("%05d.mem", fid+1)
	// records returns the bytes of above[i:j].
	records := func(i, j int) []byte {
		if i >= j {
			return nil
		}
		return log[above[i].off:above[j-1].end]
	}
	rng := rand.New(rand.NewPCG(seed, 13))
	scratch := scratchDir(t)
	n := len(above)
	trials := [][3]int{{0, n / 2, n}, {n / 3, 2 * n / 3, n}, {n - 1, n - 1, n}, {0, 0, 0}}
	for range 40 {
		x := []int{rng.IntN(n + 1), rng.IntN(n + 1), rng.IntN(n + 1)}
		slices.Sort(x)
		trials = append(trials, [3]int{x[0], x[1], x[2]})
	}
	if testing.Short() {
		trials = trials[:12]
	}
	for _, tr := range trials {
		a, b, e := tr[0], tr[1], tr[2]
		cut := dirImage{}
		maps.Copy(cut, img)
		older := append(bytes.Clone(log[:syncEnd]), records(0, a)...)
		cut[active] = fileImage{data: older, size: img[active].size}
		if b < e {
			cut[newer] = fileImage{data: append(bytes.Clone(log[:walHeaderSize]), records(b, e)...), size: img[active].size}
		}
		d := filepath.Join(scratch, "copy")
		cut.write(t, d, nil)
		what := fmt.Sprintf("records above the sync kept: [0,%d) in %s, [%d,%d) in %s, of %d", a, active, b, e, newer, n)
		if got := c.recoverAndCheck(t, d, "another boot", 1+rng.IntN(16), what); got != synced {
			t.Fatalf("%s: recovered applied index %d, want the %d Sync returned", what, got, synced)
		}
		os.RemoveAll(d)
	}
	t.Logf("%d power-loss images over %d log records above the sync at %d", len(trials), n, synced)
}

// TestDurableIndexAcrossReboots checks which applied index Open trusts on a
// new boot: Badger's after a clean close, the one Sync made durable after
// the store was left open, and Badger's again once nothing is above it.
func TestDurableIndexAcrossReboots(t *testing.T) {
	h := newHarness(t, 21)
	for range 20 {
		h.step(1 + h.rng.IntN(8))
	}
	last := h.s.AppliedIndex()
	reopenOn := func(boot string, crash bool) uint64 {
		t.Helper()
		if crash {
			// Leave the store as a crash would: Badger closed, so that
			// a copy can be opened, but the store not marked closed.
			img := takeImage(t, h.cfg.Dir)
			h.s.Close()
			d := filepath.Join(t.TempDir(), "crashed")
			img.write(t, d, nil)
			h.cfg.Dir = d
		} else if err := h.s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := open(h.cfg, boot)
		if err != nil {
			t.Fatal(err)
		}
		h.s = s
		return s.AppliedIndex()
	}
	if got := reopenOn("boot 2", false); got != last {
		t.Fatalf("after a clean close and a reboot: applied %d, want %d", got, last)
	}
	// Left open, same boot: a process crash keeps everything.
	if got := reopenOn("boot 2", true); got != last {
		t.Fatalf("after a process crash: applied %d, want %d", got, last)
	}
	// Left open, new boot: back to what Sync made durable (a clean close
	// made everything durable, so that is the last index again).
	if got := reopenOn("boot 3", true); got != last {
		t.Fatalf("after a reboot with nothing unsynced: applied %d, want %d", got, last)
	}
	for range 10 {
		h.step(1 + h.rng.IntN(8))
	}
	synced, err := h.s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		h.step(1 + h.rng.IntN(8))
	}
	if got := reopenOn("boot 4", true); got != synced {
		t.Fatalf("after a reboot with the store open: applied %d, want the %d Sync returned", got, synced)
	}
}

// TestReappliedAfterRebootStaysApplied: after a reboot took a store back
// to its durable index, below the applied index Badger held, the entries
// above it are applied again (a follower does, from the leader). The
// applied index they record must be the one the next open reads, although
// Badger still holds the older record at a higher version: a clean close
// then a reopen finds where the store got to.
func TestReappliedAfterRebootStaysApplied(t *testing.T) {
	h := newHarness(t, 23)
	var groups [][]core.Entry
	apply := func() {
		entries, results, batches := h.generate(1 + h.rng.IntN(8))
		h.applyGroup(entries, results, batches)
		groups = append(groups, entries)
	}
	for range 10 {
		apply()
	}
	synced, err := h.s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		apply()
	}
	img := takeImage(t, h.cfg.Dir)
	h.s.Close()
	h.cfg.Dir = filepath.Join(t.TempDir(), "rebooted")
	img.write(t, h.cfg.Dir, nil)
	s, err := open(h.cfg, "boot 2")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.AppliedIndex(); got != synced {
		t.Fatalf("after a reboot: applied %d, want the %d Sync returned", got, synced)
	}
	for _, g := range groups[10:15] {
		if _, _, err := s.Apply(g); err != nil {
			t.Fatal(err)
		}
	}
	reached := s.AppliedIndex()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = open(h.cfg, "boot 2"); err != nil {
		t.Fatalf("reopen after applying up to %d again: %v", reached, err)
	}
	h.s = s
	if got := s.AppliedIndex(); got != reached {
		t.Fatalf("after a clean close: applied %d, want %d", got, reached)
	}
}

// TestSkipToAfterPowerLoss covers a single member whose log lost, to a
// power loss, groups that Badger had written (and kept) while the log
// flushed them: the member replays what its log has, and new entries take
// the lost indexes. The store must first skip past everything it holds
// (SkipTo its Ceiling): afterwards, with new entries applied, it must hold
// exactly what a store fed only the surviving and the new entries holds.
func TestSkipToAfterPowerLoss(t *testing.T) {
	seed := testSeed(t)
	c := newCrashScenario(t, seed, 2<<20)
	for c.h.gen.index < 100 {
		c.random(c.h.groupSize())
	}
	synced, err := c.h.s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	c.random(5) // the log keeps this group...
	kept := c.h.s.AppliedIndex()
	c.crashWindow(40 << 10) // ...and loses these, which Badger keeps
	img := takeImage(t, c.h.cfg.Dir)
	d := filepath.Join(scratchDir(t), "copy")
	img.write(t, d, nil)
	s, err := open(Config{Dir: d, MemTableSize: c.h.cfg.MemTableSize, BlockCacheSize: 1 << 20}, "another boot")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.AppliedIndex() != synced {
		t.Fatalf("reopened at %d, want %d", s.AppliedIndex(), synced)
	}
	if _, _, err := s.Apply(c.after(synced)[:kept-synced]); err != nil {
		t.Fatal(err)
	}
	ceiling := s.Ceiling()
	if ceiling < c.h.s.AppliedIndex() {
		t.Fatalf("ceiling %d is below the %d Badger kept", ceiling, c.h.s.AppliedIndex())
	}
	if err := s.SkipTo(ceiling); err != nil {
		t.Fatal(err)
	}
	if s.AppliedIndex() != ceiling {
		t.Fatalf("applied %d after SkipTo(%d)", s.AppliedIndex(), ceiling)
	}
	// New entries at the indexes after the ceiling, some on the lost
	// groups' keys.
	fresh := []core.Op{
		txnOf(core.TxnOp{Kind: core.OpPut, Key: []byte("lk/1"), Value: []byte("new")}),
		txnOf(core.TxnOp{Kind: core.OpCreate, Key: []byte("/cc"), Value: []byte("new"), Create: &core.CreateOptions{}}),
		{LeaseGrant: &core.LeaseGrant{ID: 100, TTL: 30}},
		txnOf(core.TxnOp{Kind: core.OpPut, Key: []byte("big/03"), Value: []byte("small")}),
	}
	var entries []core.Entry
	for i, op := range fresh {
		entries = append(entries, core.Entry{Index: ceiling + 1 + uint64(i), Time: int64(ceiling) + int64(i), Op: op})
	}
	// The reference never saw the lost groups.
	ref, err := Open(Config{Dir: t.TempDir(), MemTableSize: 2 << 20, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, g := range c.groups {
		if g[len(g)-1].Index > kept {
			break
		}
		if _, _, err := ref.Apply(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := ref.SkipTo(ceiling); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, ref} {
		if _, _, err := st.Apply(entries); err != nil {
			t.Fatal(err)
		}
	}
	if d := diffDumps(dumpStore(t, s), dumpStore(t, ref)); d != "" {
		t.Fatalf("after skipping to %d and applying new entries, the store differs from one that never held the lost groups:%s", ceiling, d)
	}
}
