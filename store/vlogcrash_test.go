package store

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/januskv/janus/core"
)

var allCuts = flag.Bool("store.allcuts", false, "TestCrashCutValueLog: reopen every cut (default: every memtable log record boundary with the value log the records need, and a quarter of the other cuts)")

// Badger's meta bit of a record whose value is a pointer into the value
// log (bitValuePointer in value.go).
const bitValuePointer = 1 << 1

// vlogPointer is a value pointer as Badger encodes it in a record's value
// (valuePointer in structs.go: three native-endian uint32s).
type vlogPointer struct{ fid, length, offset uint32 }

func (r walRecord) pointer() (vlogPointer, bool) {
	if r.meta&bitValuePointer == 0 || len(r.value) != 12 {
		return vlogPointer{}, false
	}
	le := binary.NativeEndian
	return vlogPointer{le.Uint32(r.value[0:]), le.Uint32(r.value[4:]), le.Uint32(r.value[8:])}, true
}

// vlogFiles returns the image's value log files, oldest first.
func (img dirImage) vlogFiles() []string {
	var out []string
	for name := range img {
		if strings.HasSuffix(name, ".vlog") {
			out = append(out, name)
		}
	}
	slices.Sort(out) // fixed-width file ids
	return out
}

// fileID is the number a memtable or value log file is named by.
func fileID(t testing.TB, name string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSuffix(name, ".mem"), ".vlog"), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

// vlogWindow applies groups whose values go to the value log beside
// small ones: big puts in one transaction, an overwrite and a delete of
// big values, a ZooKeeper create and setData with big data, a big value
// under a lease that a later group revokes, and values on either side of
// the threshold.
func (c *crashScenario) vlogWindow(big int) {
	threshold := int(valueThreshold(c.h.cfg.MemTableSize))
	val := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	put := func(k string, v []byte, lease int64) core.Op {
		return txnOf(core.TxnOp{Kind: core.OpPut, Key: []byte(k), Value: v, Lease: lease})
	}
	c.ops(
		txnOf(
			core.TxnOp{Kind: core.OpPut, Key: []byte("vl/1"), Value: val(big, '1')},
			core.TxnOp{Kind: core.OpPut, Key: []byte("vl/2"), Value: val(big+7, '2')},
			core.TxnOp{Kind: core.OpPut, Key: []byte("vl/small"), Value: []byte("s")},
			core.TxnOp{Kind: core.OpPut, Key: []byte("vl/3"), Value: val(big+13, '3')},
		),
		core.Op{LeaseGrant: &core.LeaseGrant{ID: 300, TTL: 60}},
		put("vl/leased", val(big, 'l'), 300),
	)
	c.ops(
		put("vl/1", val(big+1, 'a'), 0),
		txnOf(core.TxnOp{Kind: core.OpDeleteRange, Key: []byte("vl/2")}),
		txnOf(core.TxnOp{Kind: core.OpCreate, Key: []byte("/vz"), Value: val(big, 'z'), Create: &core.CreateOptions{}}),
		put("vl/below", val(threshold-100, 'b'), 0),
		put("vl/at", val(threshold, 't'), 0),
	)
	c.ops(
		txnOf(core.TxnOp{Kind: core.OpSetData, Key: []byte("/vz"), Value: val(big+3, 'y'), ExpectedVersion: -1}),
		core.Op{LeaseRevoke: &core.LeaseRevoke{ID: 300}},
		put("vl/3", []byte("now small"), 0),
	)
}

// vlogScenario builds a store whose last groups write values to the value
// log, and returns it with the image taken before them and the offsets at
// which they start in the active memtable log and the active value log.
type vlogScenario struct {
	c                      *crashScenario
	before                 dirImage
	activeMem, activeVlog  string
	memFrom, vlogFrom      int
	memFiles, vlogFileList []string
	// synced is the index Sync returned before the window, if it ran.
	synced uint64
}

func newVlogScenario(t *testing.T, seed uint64, sync bool) *vlogScenario {
	const memTable = 2 << 20
	c := newCrashScenario(t, seed, memTable)
	big := int(valueThreshold(memTable)) + 512
	for c.h.gen.index < 100 {
		c.random(c.h.groupSize())
	}
	// Values in the value log before the window: pointers the cuts must
	// keep leading somewhere.
	c.ops(txnOf(core.TxnOp{Kind: core.OpPut, Key: []byte("old/1"), Value: bytes.Repeat([]byte("o"), big)}))
	for c.h.gen.index < 150 {
		c.random(c.h.groupSize())
	}
	sc := &vlogScenario{c: c}
	if sync {
		var err error
		if sc.synced, err = c.h.s.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	sc.before = takeImage(t, c.h.cfg.Dir)
	sc.memFiles, sc.vlogFileList = sc.before.memFiles(), sc.before.vlogFiles()
	sc.activeMem = sc.memFiles[len(sc.memFiles)-1]
	sc.activeVlog = sc.vlogFileList[len(sc.vlogFileList)-1]
	sc.memFrom, sc.vlogFrom = walHeaderSize, walHeaderSize
	if r := walRecords(sc.before[sc.activeMem].data); len(r) > 0 {
		sc.memFrom = r[len(r)-1].end
	}
	if r := walRecords(sc.before[sc.activeVlog].data); len(r) > 0 {
		sc.vlogFrom = r[len(r)-1].end
	}
	c.crashWindow(big)
	c.vlogWindow(big)
	return sc
}

// image takes the store's image after the window and checks that no
// memtable or value log file was started meanwhile.
func (sc *vlogScenario) image(t *testing.T) dirImage {
	t.Helper()
	img := takeImage(t, sc.c.h.cfg.Dir)
	if got := img.memFiles(); !reflect.DeepEqual(got, sc.memFiles) {
		t.Fatalf("memtable logs %v became %v: a rotation would make the cuts unlike a crash", sc.memFiles, got)
	}
	if got := img.vlogFiles(); !reflect.DeepEqual(got, sc.vlogFileList) {
		t.Fatalf("value logs %v became %v: a rotation would make the cuts unlike a crash", sc.vlogFileList, got)
	}
	return img
}

// TestCrashCutValueLog checks that a crash of the process anywhere in the
// writing of groups whose values go to the value log leaves whole groups.
// Badger copies a write's values into the value log before its records
// into the memtable log, so a crash of the process keeps at least the
// values the surviving records point to: the memtable log is cut at every
// record boundary of the last groups and inside every record, and the value
// log, for each cut, exactly where the surviving pointers end, inside the
// next value, or not at all; the cut files are alternately zero-filled to
// their size (as Badger preallocates them) and truncated. Each copy must
// reopen at the end of a group with that group's state and replay to the
// same final state.
func TestCrashCutValueLog(t *testing.T) {
	seed := testSeed(t)
	sc := newVlogScenario(t, seed, false)
	c := sc.c
	img := sc.image(t)
	mem, vlog := img[sc.activeMem].data, img[sc.activeVlog].data
	vfid := fileID(t, sc.activeVlog)
	var vrecs []walRecord
	for _, r := range walRecords(vlog) {
		if r.off >= sc.vlogFrom {
			vrecs = append(vrecs, r)
		}
	}
	if len(vrecs) < 15 {
		t.Fatalf("only %d values went to the value log in the window", len(vrecs))
	}
	// need[i] is the value log's end that the first i memtable log
	// records (of the window) need.
	mrecs := walRecords(mem)
	// essential cuts (the memtable log at a record boundary, the value
	// log where the records before need it) are always reopened.
	type cut struct {
		mem, vlog int
		essential bool
	}
	var cuts []cut
	need := sc.vlogFrom
	pointers := 0
	for _, r := range mrecs {
		if r.end <= sc.memFrom {
			continue
		}
		// Cut before the record, then inside it; the value log at what
		// the records before need, inside the value after that, and
		// whole.
		vcuts := []int{need, len(vlog)}
		for _, v := range vrecs {
			if v.off >= need {
				vcuts = append(vcuts, v.off+(v.end-v.off)/2)
				break
			}
		}
		for j, m := range []int{r.off, r.off + (r.end-r.off)/2} {
			for k, v := range vcuts {
				cuts = append(cuts, cut{m, v, j == 0 && k == 0})
			}
		}
		if p, ok := r.pointer(); ok && p.fid == vfid {
			need = max(need, int(p.offset+p.length))
			pointers++
		}
	}
	cuts = append(cuts, cut{mrecs[len(mrecs)-1].end, len(vlog), true})
	window := 0
	for _, r := range mrecs {
		if r.off >= sc.memFrom {
			window++
		}
	}
	if pointers < 15 {
		t.Fatalf("only %d memtable log records of the window point into the value log", pointers)
	}
	rng := rand.New(rand.NewPCG(seed, 31))
	boot := bootID()
	scratch := scratchDir(t)
	recovered := map[uint64]int{}
	reopened := 0
	for i, ct := range cuts {
		switch {
		case testing.Short() && i%7 != 0 && i != len(cuts)-1:
			continue
		case !testing.Short() && !*allCuts && !ct.essential && i%4 != 0:
			continue
		}
		reopened++
		cut := dirImage{}
		maps.Copy(cut, img)
		truncate := i%2 == 1
		for name, at := range map[string]int{sc.activeMem: ct.mem, sc.activeVlog: ct.vlog} {
			f := img[name]
			f.data = f.data[:at]
			if truncate {
				f.size = int64(at)
			}
			cut[name] = f
		}
		d := filepath.Join(scratch, "copy")
		cut.write(t, d, nil)
		what := fmt.Sprintf("memtable log cut at %d, value log at %d (truncated %v)", ct.mem, ct.vlog, truncate)
		got := c.recoverAndCheck(t, d, boot, 1+rng.IntN(8), what)
		recovered[got]++
		os.RemoveAll(d)
	}
	t.Logf("%d cuts reopened of %d over %d memtable log records (%d pointing into the value log) and %d values of the last %d groups; recovered applied index: cuts %v",
		reopened, len(cuts), window, pointers, len(vrecs), windowGroups+3, recovered)
	if want := windowGroups + 3 + 1; len(recovered) != want && !testing.Short() {
		t.Fatalf("the cuts recovered %d distinct applied indexes, want %d", len(recovered), want)
	}
}

// TestPowerLossCutValueLog checks what a crash of the machine leaves when
// values are in the value log. After Sync more groups are written; then
// the memtable log and the value log each keep what Sync flushed and any
// part of what came after it that the page cache wrote back: a prefix, a
// hole of zeros, then a later run (the memtable log's later run may also
// be in a newer memtable log), chosen independently, so that surviving
// records point into lost values and surviving values belong to lost
// records. On a new boot the store must reopen at exactly the index Sync
// returned, with that index's state, and replay to the same final state.
func TestPowerLossCutValueLog(t *testing.T) {
	seed := testSeed(t)
	sc := newVlogScenario(t, seed, true)
	c := sc.c
	img := sc.image(t)
	syncIndex := sc.synced
	mem, vlog := img[sc.activeMem].data, img[sc.activeVlog].data
	var mrecs, vrecs []walRecord
	for _, r := range walRecords(mem) {
		if r.off >= sc.memFrom {
			mrecs = append(mrecs, r)
		}
	}
	for _, r := range walRecords(vlog) {
		if r.off >= sc.vlogFrom {
			vrecs = append(vrecs, r)
		}
	}
	newerMem := fmt.Sprintf("%05d.mem", fileID(t, sc.activeMem)+1)
	// run returns recs[i:j]'s bytes.
	run := func(b []byte, recs []walRecord, i, j int) []byte {
		if i >= j {
			return nil
		}
		return b[recs[i].off:recs[j-1].end]
	}
	// holed returns b up to from, recs[:a], zeros, recs[bb:e] in place.
	holed := func(b []byte, from int, recs []walRecord, a, bb, e int) []byte {
		out := bytes.Clone(b[:from])
		out = append(out, run(b, recs, 0, a)...)
		if bb < e {
			out = append(out, make([]byte, recs[bb].off-len(out))...)
			out = append(out, run(b, recs, bb, e)...)
		}
		return out
	}
	rng := rand.New(rand.NewPCG(seed, 37))
	pick3 := func(n int) [3]int {
		x := []int{rng.IntN(n + 1), rng.IntN(n + 1), rng.IntN(n + 1)}
		slices.Sort(x)
		return [3]int{x[0], x[1], x[2]}
	}
	nm, nv := len(mrecs), len(vrecs)
	type trial struct{ mem, vlog [3]int }
	trials := []trial{
		{[3]int{nm, nm, nm}, [3]int{0, 0, 0}},                // every record, no value
		{[3]int{0, 0, 0}, [3]int{nv, nv, nv}},                // every value, no record
		{[3]int{nm, nm, nm}, [3]int{nv / 2, nv / 2, nv / 2}}, // half the values
		{[3]int{nm / 2, nm / 2, nm}, [3]int{0, nv / 3, nv}},  // holes in both
	}
	for range 40 {
		trials = append(trials, trial{pick3(nm), pick3(nv)})
	}
	if testing.Short() {
		trials = trials[:12]
	}
	scratch := scratchDir(t)
	for _, tr := range trials {
		cut := dirImage{}
		maps.Copy(cut, img)
		m, v := tr.mem, tr.vlog
		// The memtable log's later run goes to a newer memtable log half
		// the time, in place in the same log otherwise.
		if rng.IntN(2) == 0 && m[1] < m[2] {
			cut[sc.activeMem] = fileImage{data: holed(mem, sc.memFrom, mrecs, m[0], 0, 0), size: img[sc.activeMem].size}
			cut[newerMem] = fileImage{data: append(bytes.Clone(mem[:walHeaderSize]), run(mem, mrecs, m[1], m[2])...), size: img[sc.activeMem].size}
		} else {
			cut[sc.activeMem] = fileImage{data: holed(mem, sc.memFrom, mrecs, m[0], m[1], m[2]), size: img[sc.activeMem].size}
		}
		cut[sc.activeVlog] = fileImage{data: holed(vlog, sc.vlogFrom, vrecs, v[0], v[1], v[2]), size: img[sc.activeVlog].size}
		d := filepath.Join(scratch, "copy")
		cut.write(t, d, nil)
		what := fmt.Sprintf("memtable log records kept [0,%d) [%d,%d) of %d, values kept [0,%d) [%d,%d) of %d", m[0], m[1], m[2], nm, v[0], v[1], v[2], nv)
		if got := c.recoverAndCheck(t, d, "another boot", 1+rng.IntN(16), what); got != syncIndex {
			t.Fatalf("%s: recovered applied index %d, want the %d Sync returned", what, got, syncIndex)
		}
		os.RemoveAll(d)
	}
	t.Logf("%d power-loss images over %d memtable log records and %d values above the sync at %d", len(trials), nm, nv, syncIndex)
}

// TestValueLogGCPowerLoss checks that value log GC never deletes a file
// before the values it moved out of it are on disk. Big values are
// overwritten and deleted across several value log files, compacted and
// made durable; Reclaim then has GC rewrite files. The image a power loss
// leaves keeps every table (Badger fsyncs them), every deletion, and of
// the memtable and value logs only what the store had fsynced when it last
// did. On a new boot it must reopen at the last durable index with that
// index's state, every value readable.
func TestValueLogGCPowerLoss(t *testing.T) {
	seed := testSeed(t)
	c := newCrashScenario(t, seed, 2<<20)
	h := c.h
	h.cfg.valueLogFileSize = 1 << 20
	h.reopen()
	big := int(valueThreshold(h.cfg.MemTableSize)) + 512
	rng := rand.New(rand.NewPCG(seed, 41))
	for round := range 60 {
		var ops []core.TxnOp
		for range 2 {
			k := fmt.Sprintf("gc/%d", rng.IntN(8))
			if rng.IntN(5) == 0 {
				ops = append(ops, core.TxnOp{Kind: core.OpDeleteRange, Key: []byte(k)})
				continue
			}
			ops = append(ops, core.TxnOp{Kind: core.OpPut, Key: []byte(k), Value: bytes.Repeat([]byte{byte('a' + round%26)}, big+rng.IntN(4096))})
		}
		c.ops(txnOf(ops...))
	}
	c.ops(core.Op{Compact: &core.Compact{Rev: h.meta().Rev}})
	before := takeImage(t, h.cfg.Dir).vlogFiles()
	// What a power loss keeps of the logs: their contents at the last
	// fsync.
	var synced dirImage
	h.s.onFilesSynced = func() { synced = takeImage(t, h.cfg.Dir) }
	if err := h.s.Reclaim(); err != nil {
		t.Fatal(err)
	}
	h.s.onFilesSynced = nil
	img := takeImage(t, h.cfg.Dir)
	after := img.vlogFiles()
	var removed []string
	for _, f := range before {
		if _, ok := img[f]; !ok {
			removed = append(removed, f)
		}
	}
	if len(removed) == 0 {
		t.Fatalf("GC rewrote no value log file (before %v, after %v): the test shows nothing", before, after)
	}
	cut := dirImage{}
	for name, f := range img {
		if strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog") {
			f.data = synced[name].data // nothing if the file is newer than the fsync
		}
		cut[name] = f
	}
	d := filepath.Join(scratchDir(t), "copy")
	cut.write(t, d, nil)
	got := c.recoverAndCheck(t, d, "another boot", 4, "power loss after value log GC")
	t.Logf("GC removed %v of %v; recovered at %d of %d", removed, before, got, h.s.AppliedIndex())
}

// TestOpenRemovesEmptyLogs: a crash while Badger deletes a memtable or
// value log file, or creates one, leaves it empty, which Badger refuses to
// open. The store must open, with its state.
func TestOpenRemovesEmptyLogs(t *testing.T) {
	h := newHarness(t, 43)
	for range 10 {
		h.step(1 + h.rng.IntN(8))
	}
	want := dumpStore(t, h.s)
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	img := takeImage(t, h.cfg.Dir)
	vlogs := img.vlogFiles()
	for _, name := range []string{
		"00001.mem", // a flushed memtable's log
		"00099.mem", // a new memtable's log
		fmt.Sprintf("%06d.vlog", fileID(t, vlogs[len(vlogs)-1])+1 /* a new value log */),
		fmt.Sprintf("%06d.vlog", 0 /* a value log GC deleted */),
	} {
		if err := os.WriteFile(filepath.Join(h.cfg.Dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(h.cfg)
		if err != nil {
			t.Fatalf("open with an empty %s: %v", name, err)
		}
		h.s = s
		if d := diffDumps(dumpStore(t, s), want); d != "" {
			t.Fatalf("with an empty %s: state differs:%s", name, d)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
