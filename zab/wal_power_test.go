package zab

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	powerLosses = flag.Int("zab.power.losses", 0, "power losses TestLogSurvivesPowerLoss runs (0: a short run; make chaos runs many)")
	powerSeed   = flag.Uint64("zab.power.seed", 0, "seed for TestLogSurvivesPowerLoss, to replay a failure (0: from the clock)")
)

// TestLogSurvivesPowerLoss drives the log on a powerFS: it appends groups,
// trims and truncates, cuts the power at a random operation (while
// appending, syncing, rolling a segment, trimming, truncating, or
// recovering from the previous cut), restarts, and checks that the log
// opens, holds every acknowledged entry with its exact content and nothing
// that was never written, and takes new appends. After some restarts it
// damages an acknowledged record on a copy of the disk and checks that the
// log refuses to open, naming the segment and the offset.
func TestLogSurvivesPowerLoss(t *testing.T) {
	losses := *powerLosses
	if losses == 0 {
		losses = 400
		if testing.Short() {
			losses = 100
		}
	}
	seed := *powerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -zab.power.seed=%d), %d power losses", seed, seed, losses)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var st powerStats
	for st.losses < losses {
		r := newPowerRun(t, rng, &st)
		for range 1 + rng.IntN(30) {
			r.work()
			r.restart()
			if rng.IntN(3) == 0 {
				r.damageIsRefused()
			}
			if st.losses >= losses {
				break
			}
		}
		r.cleanRestart()
		st.runs++
	}
	t.Logf("%d power losses in %d logs (%d during recovery), %d entries acknowledged, %d configuration entries appended, "+
		"%d torn tails cut (%d with records of the torn group beyond the damage), %d unacknowledged entries kept, "+
		"%d damaged acknowledged records refused (%d of them configuration entries)",
		st.losses, st.runs, st.duringRecovery, st.acked, st.configs, st.cuts, st.cutsWithRecordsAfter, st.keptUnacked, st.refused, st.configsRefused)
	if st.cutsWithRecordsAfter == 0 || st.refused == 0 || st.configsRefused == 0 {
		t.Errorf("the run never met a torn tail with records after the damage (%d) or never refused damage (%d, %d of configuration entries): the test lost its teeth",
			st.cutsWithRecordsAfter, st.refused, st.configsRefused)
	}
}

type powerStats struct {
	runs, losses, duringRecovery int
	acked, keptUnacked           int
	cuts, cutsWithRecordsAfter   int
	refused                      int
	configs, configsRefused      int // configuration entries appended; damaged acknowledged ones refused
}

// powerRun is one log on one powerFS, and what it must hold.
type powerRun struct {
	t       *testing.T
	rng     *rand.Rand
	st      *powerStats
	fs      *powerFS
	dir     string
	segSize int64
	logs    *tornCounter
	w       *wal

	// must holds entry i+1 at i: every entry acknowledged (appended without
	// error) or found in the log by a restart, and not truncated since.
	// Those below trimmed+1 may have been trimmed away.
	must []Entry
	// may holds the entries that may follow must: written, never
	// acknowledged (or a tail whose truncation was cut short).
	may     []Entry
	trimmed uint64
	epoch   uint32
}

func newPowerRun(t *testing.T, rng *rand.Rand, st *powerStats) *powerRun {
	page := []int{64, 512, 4096}[rng.IntN(3)]
	fsys := newPowerFS(rng, page, page/[]int{1, 4, 8}[rng.IntN(3)])
	fsys.noAllocate = rng.IntN(4) == 0
	r := &powerRun{t: t, rng: rng, st: st, fs: fsys, dir: "/log", segSize: []int64{512, 2048, 16384}[rng.IntN(3)],
		logs: &tornCounter{}, epoch: 1}
	// A new log: its first segment is created durably before anything
	// depends on it, so a cut here just means starting again.
	for {
		w, err := openWAL(r.fs, r.dir, slog.New(r.logs), r.segSize)
		if err == nil {
			err = w.reset(1)
		}
		if err == nil {
			r.w = w
			return r
		}
		r.fatalUnlessCut(err, "create the log")
		r.fs.crash()
	}
}

func (r *powerRun) fatalUnlessCut(err error, what string) {
	r.t.Helper()
	if !errors.Is(err, errPowerCut) {
		r.t.Fatalf("%s: %v", what, err)
	}
}

// work appends, trims and truncates until the power is cut, at a random
// operation.
func (r *powerRun) work() {
	r.fs.cutAt = r.fs.ops + 1 + r.rng.IntN(80)
	for !r.fs.cut {
		switch x := r.rng.IntN(100); {
		case x < 84:
			r.appendGroup()
		case x < 92:
			r.trim()
		default:
			r.truncate()
		}
	}
	r.st.losses++
}

func (r *powerRun) appendGroup() {
	n := 1 + r.rng.IntN(8)
	if r.rng.IntN(8) == 0 {
		n = 1 + r.rng.IntN(60)
	}
	ents := make([]Entry, n)
	for i := range ents {
		index := uint64(len(r.must) + i + 1)
		size := r.rng.IntN(100)
		if r.rng.IntN(6) == 0 {
			size = r.rng.IntN(1500)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.rng.Uint32())
		}
		ents[i] = Entry{Index: index, Zxid: MakeZxid(r.epoch, uint32(index)), Time: int64(index), Data: data}
		if r.rng.IntN(2) == 0 {
			ents[i].Origin, ents[i].ReqID = 1+r.rng.Uint64N(5), r.rng.Uint64()
		}
		if r.rng.IntN(10) == 0 {
			// A configuration entry: its record carries its kind.
			ents[i].Kind = EntryMembership
			r.st.configs++
		}
	}
	if err := r.w.append(ents); err != nil {
		r.fatalUnlessCut(err, "append")
		r.may = ents
		return
	}
	r.must = append(r.must, ents...)
	r.st.acked += len(ents)
}

func (r *powerRun) trim() {
	index := r.rng.Uint64N(uint64(len(r.must)) + 1)
	r.trimmed = max(r.trimmed, index)
	if _, err := r.w.trimThrough(index); err != nil {
		r.fatalUnlessCut(err, "trim")
	}
}

// truncate drops an acknowledged tail, as a follower does on TRUNC; later
// entries are in a new epoch, so their zxids are above every dropped one.
func (r *powerRun) truncate() {
	base := r.w.baseOf().index
	index := base + r.rng.Uint64N(uint64(len(r.must))-base+1)
	err := r.w.truncateAfter(index)
	if err != nil {
		r.fatalUnlessCut(err, "truncate")
		r.may = slices.Clone(r.must[index:]) // the cut may have landed in part, or not at all
	}
	r.must = r.must[:index]
	r.epoch++
}

// restart crashes the disk and opens the log again, cutting the power
// during the recovery now and then, and checks what it holds.
func (r *powerRun) restart() {
	r.t.Helper()
	r.fs.crash()
	for {
		if r.rng.IntN(5) == 0 {
			r.fs.cutAt = r.fs.ops + 1 + r.rng.IntN(6)
		}
		w, err := r.reopen()
		if err == nil {
			r.fs.cutAt = 0
			r.w = w
			break
		}
		if !errors.Is(err, errPowerCut) {
			r.t.Fatalf("the log refused to start after a power loss: %v", err)
		}
		r.st.duringRecovery++
		r.fs.crash()
	}
	r.check()
}

func (r *powerRun) reopen() (*wal, error) {
	before := *r.logs
	w, err := openWAL(r.fs, r.dir, slog.New(r.logs), r.segSize)
	if err == nil {
		if w.segmentCount() == 0 {
			return nil, fmt.Errorf("the log has no segment left")
		}
		err = w.resume()
	}
	if err == nil {
		r.st.cuts += r.logs.cuts - before.cuts
		r.st.cutsWithRecordsAfter += r.logs.cutsWithRecordsAfter - before.cutsWithRecordsAfter
	}
	return w, err
}

// cleanRestart closes the log and opens it again without a power loss: it
// must hold exactly what it held.
func (r *powerRun) cleanRestart() {
	r.t.Helper()
	r.w.close()
	w, err := r.reopen()
	if err != nil {
		r.t.Fatalf("reopen after a clean close: %v", err)
	}
	r.w = w
	r.check()
	if int(r.w.lastIndex) != len(r.must) {
		r.t.Fatalf("after a clean restart the log ends at %d, want %d", r.w.lastIndex, len(r.must))
	}
}

// check verifies that the log holds every entry of must from the first it
// still holds, then a prefix of may and nothing else, and makes that its
// new must.
func (r *powerRun) check() {
	r.t.Helper()
	w := r.w
	first, last := w.firstIndex(), w.lastIndex
	if first > r.trimmed+1 {
		r.t.Fatalf("the log begins at %d but was trimmed only through %d", first, r.trimmed)
	}
	if int(last) < len(r.must) {
		r.t.Fatalf("the log ends at %d: acknowledged entries %d-%d are lost", last, last+1, len(r.must))
	}
	if int(last) > len(r.must)+len(r.may) {
		r.t.Fatalf("the log ends at %d, after the last entry written (%d)", last, len(r.must)+len(r.may))
	}
	want := append(r.must, r.may[:int(last)-len(r.must)]...)
	next := first
	if last >= first {
		err := w.read(first, last, 50, func(batch []Entry) error {
			for _, e := range batch {
				if wa := want[e.Index-1]; e.Index != next || e.Zxid != wa.Zxid || e.Time != wa.Time ||
					e.Origin != wa.Origin || e.ReqID != wa.ReqID || e.Kind != wa.Kind || !bytes.Equal(e.Data, wa.Data) {
					return fmt.Errorf("entry %d is %+v, want %+v", next, e, wa)
				}
				next++
			}
			return nil
		})
		if err != nil {
			r.t.Fatalf("read the log after a restart: %v", err)
		}
	}
	wantZxid := w.baseOf().zxid
	if last > 0 && last >= first {
		wantZxid = want[last-1].Zxid
	}
	if w.lastZxid != wantZxid {
		r.t.Fatalf("the log's last zxid is %s, want %s", FormatZxid(w.lastZxid), FormatZxid(wantZxid))
	}
	r.st.keptUnacked += int(last) - len(r.must)
	r.must, r.may = want, nil
}

// damageIsRefused damages one record that the disk proves acknowledged (in
// a sealed segment, or in the last one before a later group) on a copy of
// the disk, and checks that the log refuses to open there.
func (r *powerRun) damageIsRefused() {
	r.t.Helper()
	disk := r.fs.clone()
	names, _ := disk.ReadDir(r.dir)
	var segs []string
	for _, name := range names {
		if _, ok := parseSegmentName(name); ok {
			segs = append(segs, filepath.Join(r.dir, name))
		}
	}
	type rec struct {
		path    string
		off, n  int
		index   uint64
		lastSeg bool
		groupOf uint64
		config  bool
	}
	var recs []rec
	for i, path := range segs {
		buf := disk.names[path].data
		off, _, _, err := parseSegmentHeader(buf)
		if err != nil {
			r.t.Fatalf("%s: %v", path, err)
		}
		for {
			e, g, n, err := decodeRecordGroup(buf[off:])
			if err != nil {
				break
			}
			recs = append(recs, rec{path, off, n, e.Index, i == len(segs)-1, g, e.Kind == EntryMembership})
			off += n
		}
	}
	var acked []rec
	for _, rc := range recs {
		if !rc.lastSeg || rc.groupOf < recs[len(recs)-1].groupOf {
			acked = append(acked, rc)
		}
	}
	if len(acked) == 0 {
		return
	}
	rc := acked[r.rng.IntN(len(acked))]
	f := disk.names[rc.path]
	lo := rc.off + r.rng.IntN(rc.n)
	hi := lo + 1 + r.rng.IntN(rc.off+rc.n-lo)
	what := fmt.Sprintf("zeroed %d bytes", hi-lo)
	if r.rng.IntN(2) == 0 || !slices.ContainsFunc(f.data[lo:hi], func(b byte) bool { return b != 0 }) {
		// (Zeroing bytes that are zero already damages nothing.)
		f.data[lo] ^= byte(1 + r.rng.IntN(255))
		what = "flipped a byte"
	} else {
		clear(f.data[lo:hi])
	}
	f.disk = f.data
	_, err := openWAL(disk, r.dir, slog.New(slog.DiscardHandler), r.segSize)
	if err == nil {
		r.t.Fatalf("%s of record %d (offset %d of %s, group from %d, last segment %v; last record %d of group %d), which a later record proves synced, and the log opened",
			what, rc.index, rc.off, filepath.Base(rc.path), rc.groupOf, rc.lastSeg, recs[len(recs)-1].index, recs[len(recs)-1].groupOf)
	}
	if msg := err.Error(); !strings.Contains(msg, "refusing to start") && !strings.Contains(msg, "entries are missing") {
		r.t.Fatalf("%s of record %d: the log refused to open, but says %q", what, rc.index, msg)
	}
	if msg := err.Error(); strings.Contains(msg, "refusing to start") && (!strings.Contains(msg, filepath.Base(rc.path)) || !strings.Contains(msg, "offset")) {
		r.t.Fatalf("%s of record %d: the error %q does not name the segment %s and an offset", what, rc.index, msg, filepath.Base(rc.path))
	}
	r.st.refused++
	if rc.config {
		r.st.configsRefused++
	}
}

// tornCounter is a slog handler that counts the log's torn-tail cuts.
type tornCounter struct {
	cuts, cutsWithRecordsAfter int
}

func (c *tornCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *tornCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *tornCounter) WithGroup(string) slog.Handler            { return c }

func (c *tornCounter) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "truncating torn tail of the log" {
		return nil
	}
	c.cuts++
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "records_after_damage" && a.Value.Int64() > 0 {
			c.cutsWithRecordsAfter++
		}
		return true
	})
	return nil
}

// The epoch file and every new segment are written with writeFileAtomic:
// wherever the power is cut, a restart finds the old content or the new,
// whole.
func TestWriteFileAtomicSurvivesPowerLoss(t *testing.T) {
	seed := *powerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -zab.power.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	oldData, newData := encodeEpochs(Epochs{Accepted: 3, Current: 2}), encodeEpochs(Epochs{Accepted: 4, Current: 4})
	path := filepath.Join("/log", epochFileName)
	for cut := 1; ; cut++ {
		fsys := newPowerFS(rng, 8, 4)
		if err := writeFileAtomic(fsys, path, oldData); err != nil {
			t.Fatal(err)
		}
		fsys.cutAt = fsys.ops + cut
		err := writeFileAtomic(fsys, path, newData)
		if err != nil && !errors.Is(err, errPowerCut) {
			t.Fatal(err)
		}
		for range 20 {
			disk := fsys.clone()
			disk.crash()
			got, rerr := disk.ReadFile(path)
			if rerr != nil || (!bytes.Equal(got, oldData) && !bytes.Equal(got, newData)) {
				t.Fatalf("power cut at operation %d of the replacement: the file holds %x (%v), want %x or %x", cut, got, rerr, oldData, newData)
			}
			if err == nil && !bytes.Equal(got, newData) {
				t.Fatalf("the replacement returned, then a power loss left %x", got)
			}
		}
		if err == nil {
			t.Logf("the replacement takes %d operations; cut at each", cut-1)
			return
		}
	}
}
