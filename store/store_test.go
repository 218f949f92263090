package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/januskv/janus/core"
)

// harness drives a Store and a core.MemState with the same entries and
// remembers what the MemState looked like at every revision.
type harness struct {
	t    testing.TB
	dir  string
	cfg  Config
	s    *Store
	mem  *core.MemState
	gen  *entryGen
	rng  *rand.Rand
	dirs [][]byte // every tree path that ever had a Dir, in first-seen order
	seen map[string]bool
	keys [][]byte // every node key ever written
	// at holds, per revision, the MemState's digest (over dirs[:ndirs]) and
	// node records after the last entry at that revision.
	at      map[int64]revRecord
	events  map[int64][]core.Event
	origins map[int64]core.Origin // the Origin of each revision's op
	// peak holds the largest of each census count checkLatest saw.
	peak core.Census
}

type revRecord struct {
	hash  [32]byte
	ndirs int
	nodes map[string]*core.Node
}

func newHarness(t testing.TB, seed uint64) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{
		t: t, dir: dir, cfg: Config{Dir: dir, MemTableSize: 1 << 20, BlockCacheSize: 1 << 20},
		mem: core.NewMemState(), rng: rand.New(rand.NewPCG(seed, 7)),
		seen: map[string]bool{}, at: map[int64]revRecord{}, events: map[int64][]core.Event{}, origins: map[int64]core.Origin{},
	}
	h.gen = newEntryGen(seed, h.mem)
	h.open()
	h.record(1)
	t.Cleanup(func() {
		if h.s != nil {
			h.s.Close()
		}
	})
	return h
}

func (h *harness) open() {
	h.t.Helper()
	s, err := Open(h.cfg)
	if err != nil {
		h.t.Fatalf("open: %v", err)
	}
	h.s = s
}

func (h *harness) reopen() {
	h.t.Helper()
	if err := h.s.Close(); err != nil {
		h.t.Fatalf("close: %v", err)
	}
	h.open()
}

func (h *harness) record(rev int64) {
	nodes := map[string]*core.Node{}
	h.mem.Range(nil, nil, func(n *core.Node) bool { nodes[string(n.Key)] = n; return true })
	h.at[rev] = revRecord{hash: historyHash(h.mem, h.dirs), ndirs: len(h.dirs), nodes: nodes}
}

// historyHash digests what a View of an older revision answers exactly:
// everything but the Dir records, which the store keeps exact only at the
// end of each applied group (see Store.write). Every path's children are
// listed, Dir or not.
func historyHash(v core.View, dirs [][]byte) [32]byte {
	return core.HashView(anyDir{v}, dirs)
}

type anyDir struct{ core.View }

func (anyDir) Dir([]byte) (*core.Dir, error) { return &core.Dir{}, nil }

// generate makes n entries, applying each to the MemState.
func (h *harness) generate(n int) ([]core.Entry, []*core.Result, []*core.Batch) {
	return h.generateFrom(n, h.gen.next)
}

// generateFrom is generate with entries from next.
func (h *harness) generateFrom(n int, next func() core.Entry) ([]core.Entry, []*core.Result, []*core.Batch) {
	h.t.Helper()
	var entries []core.Entry
	var results []*core.Result
	var batches []*core.Batch
	for range n {
		e := next()
		res, b, err := h.mem.ApplyEntry(&e)
		if err != nil {
			h.t.Fatalf("mem apply %d: %v", e.Index, err)
		}
		for _, w := range b.Dirs {
			if !h.seen["d"+string(w.Path)] {
				h.seen["d"+string(w.Path)] = true
				h.dirs = append(h.dirs, w.Path)
			}
		}
		for _, w := range b.Nodes {
			if !h.seen["n"+string(w.Key)] {
				h.seen["n"+string(w.Key)] = true
				h.keys = append(h.keys, w.Key)
			}
		}
		// The record of a revision is the state at its end.
		h.record(b.Rev)
		if b.Changed {
			h.events[b.Rev] = b.Events
			h.origins[b.Rev] = b.Origin
		}
		entries, results, batches = append(entries, e), append(results, res), append(batches, b)
	}
	return entries, results, batches
}

// step applies a group of n entries to both and checks the store's answers.
func (h *harness) step(n int) {
	h.t.Helper()
	h.applyGroup(h.generate(n))
}

// applyOps applies one group of the given ops to both.
func (h *harness) applyOps(ops ...core.Op) {
	h.t.Helper()
	i := 0
	h.applyGroup(h.generateFrom(len(ops), func() core.Entry {
		h.gen.index++
		h.gen.time++
		i++
		return core.Entry{Index: h.gen.index, Time: h.gen.time, Op: ops[i-1]}
	}))
}

func (h *harness) applyGroup(entries []core.Entry, want []*core.Result, wantBatches []*core.Batch) {
	h.t.Helper()
	got, gotBatches, err := h.s.Apply(entries)
	if err != nil {
		h.t.Fatalf("store apply: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		h.t.Fatalf("results differ at entries %d..%d", entries[0].Index, entries[len(entries)-1].Index)
	}
	if !reflect.DeepEqual(gotBatches, wantBatches) {
		h.t.Fatalf("batches differ at entries %d..%d", entries[0].Index, entries[len(entries)-1].Index)
	}
	if h.s.AppliedIndex() != entries[len(entries)-1].Index {
		h.t.Fatalf("applied index %d, want %d", h.s.AppliedIndex(), entries[len(entries)-1].Index)
	}
}

func (h *harness) meta() core.Meta {
	m, _ := h.mem.Meta()
	return m
}

// checkLatest compares the latest view with the MemState, record by record.
func (h *harness) checkLatest() {
	h.t.Helper()
	v, err := h.s.Latest()
	if err != nil {
		h.t.Fatalf("latest: %v", err)
	}
	defer v.Close()
	meta := h.meta()
	if v.Rev() != meta.Rev || h.s.Rev() != meta.Rev {
		h.t.Fatalf("rev %d/%d, want %d", v.Rev(), h.s.Rev(), meta.Rev)
	}
	if core.HashView(v, h.dirs) != core.HashView(h.mem, h.dirs) {
		h.t.Fatalf("state digest differs at rev %d", meta.Rev)
	}
	// The census the store keeps as it applies is what a walk counts.
	want, err := core.CountCensus(h.mem)
	if err != nil {
		h.t.Fatal(err)
	}
	if got := h.s.Census(); got != want {
		h.t.Fatalf("census at index %d: kept %+v, a walk counts %+v", h.s.AppliedIndex(), got, want)
	}
	h.peak = core.Census{Keys: max(h.peak.Keys, want.Keys), Znodes: max(h.peak.Znodes, want.Znodes),
		Ephemerals: max(h.peak.Ephemerals, want.Ephemerals), DataBytes: max(h.peak.DataBytes, want.DataBytes),
		Leases: max(h.peak.Leases, want.Leases), Sessions: max(h.peak.Sessions, want.Sessions)}
	var live [][]byte
	for _, p := range h.dirs {
		if d, _ := h.mem.Dir(p); d != nil {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, bytes.Compare)
	var listed [][]byte
	if err := v.Dirs(func(p []byte) bool { listed = append(listed, p); return true }); err != nil {
		h.t.Fatal(err)
	}
	if !reflect.DeepEqual(listed, live) && (len(listed) != 0 || len(live) != 0) {
		h.t.Fatalf("dirs %q, want %q", listed, live)
	}
	for _, k := range append(append([][]byte{[]byte("/"), []byte("/nope")}, h.keys...), h.dirs...) {
		gn, gd, err := core.TreeNode(v, k)
		if err != nil {
			h.t.Fatal(err)
		}
		wn, wd, _ := core.TreeNode(h.mem, k)
		if !reflect.DeepEqual(gn, wn) || !reflect.DeepEqual(gd, wd) {
			h.t.Fatalf("TreeNode(%q) = %+v %+v, want %+v %+v", k, gn, gd, wn, wd)
		}
		gotKids, wantKids := children(h.t, v, k), children(h.t, h.mem, k)
		if !reflect.DeepEqual(gotKids, wantKids) {
			h.t.Fatalf("Children(%q) = %q, want %q", k, gotKids, wantKids)
		}
	}
	// Bounded ranges that stop early.
	for range 5 {
		start, end := h.gen.anyKey(), h.gen.anyKey()
		if h.rng.IntN(4) == 0 {
			end = nil
		}
		limit := 1 + h.rng.IntN(4)
		if got, want := rangeKeys(h.t, v, start, end, limit), rangeKeys(h.t, h.mem, start, end, limit); !reflect.DeepEqual(got, want) {
			h.t.Fatalf("Range(%q, %q, limit %d) = %q, want %q", start, end, limit, got, want)
		}
	}
}

func children(t testing.TB, v core.View, p []byte) []string {
	var out []string
	if err := v.Children(p, func(name []byte) bool { out = append(out, string(name)); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

func rangeKeys(t testing.TB, v core.View, start, end []byte, limit int) []string {
	var out []string
	err := v.Range(start, end, func(n *core.Node) bool {
		out = append(out, string(n.Key))
		return len(out) < limit
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkHistory reads n random past revisions and compares them with what
// the MemState was at each.
func (h *harness) checkHistory(n int) {
	h.t.Helper()
	meta := h.meta()
	floor, _ := h.s.hist.floors()
	floor = max(floor, 1)
	for range n {
		rev := floor + h.rng.Int64N(meta.Rev-floor+1)
		rec, ok := h.at[rev]
		if !ok {
			h.t.Fatalf("no record of rev %d", rev)
		}
		v, err := h.s.At(rev)
		if err != nil {
			h.t.Fatalf("At(%d) with floor %d: %v", rev, floor, err)
		}
		if v.Rev() != rev {
			h.t.Fatalf("At(%d).Rev() = %d", rev, v.Rev())
		}
		if historyHash(v, h.dirs[:rec.ndirs]) != rec.hash {
			v.Close()
			h.t.Fatalf("state at rev %d (floor %d, now %d) differs from the MemState then", rev, floor, meta.Rev)
		}
		for _, k := range h.keys {
			n, err := v.Node(k)
			if err != nil {
				h.t.Fatal(err)
			}
			if want := rec.nodes[string(k)]; !reflect.DeepEqual(n, want) {
				h.t.Fatalf("Node(%q) at rev %d = %+v, want %+v", k, rev, n, want)
			}
		}
		v.Close()
	}
	if meta.CompactRev > 1 {
		if _, err := h.s.At(meta.CompactRev - 1); !errors.Is(err, core.ErrCompacted) {
			h.t.Fatalf("At(%d) below compact rev %d: %v, want compacted", meta.CompactRev-1, meta.CompactRev, err)
		}
		if _, err := h.s.Events(meta.CompactRev-1, 0); !errors.Is(err, core.ErrCompacted) {
			h.t.Fatalf("Events(%d) below compact rev %d: %v, want compacted", meta.CompactRev-1, meta.CompactRev, err)
		}
	}
	if _, err := h.s.At(meta.Rev + 1); !errors.Is(err, core.ErrFutureRev) {
		h.t.Fatalf("At(%d) past rev %d: %v, want future rev", meta.Rev+1, meta.Rev, err)
	}
}

// checkEvents replays a random window of the event log and compares it with
// the events Apply produced.
func (h *harness) checkEvents() {
	h.t.Helper()
	meta := h.meta()
	_, floor := h.s.hist.floors()
	floor = max(floor, 2)
	if floor > meta.Rev {
		return
	}
	from := floor + h.rng.Int64N(meta.Rev-floor+1)
	to := from + h.rng.Int64N(40)
	got, err := h.s.Events(from, to)
	if err != nil {
		h.t.Fatalf("Events(%d, %d): %v", from, to, err)
	}
	to = min(to, meta.Rev)
	if len(got) != int(to-from+1) {
		h.t.Fatalf("Events(%d, %d) gave %d revisions", from, to, len(got))
	}
	for i, re := range got {
		rev := from + int64(i)
		if re.Rev != rev {
			h.t.Fatalf("Events(%d, %d)[%d] is rev %d", from, to, i, re.Rev)
		}
		if re.Origin != h.origins[rev] {
			h.t.Fatalf("rev %d: origin %v, want %v", rev, re.Origin, h.origins[rev])
		}
		want := h.events[rev]
		if len(re.Events) != len(want) {
			h.t.Fatalf("rev %d: %d events, want %d", rev, len(re.Events), len(want))
		}
		for j := range want {
			g, w := re.Events[j], want[j]
			if g.Type != w.Type || g.Implicit != w.Implicit || !sameNode(g.Node, w.Node) || !sameNode(g.Prev, w.Prev) {
				h.t.Fatalf("rev %d event %d:\n got %+v node %+v prev %+v\nwant %+v node %+v prev %+v",
					rev, j, g, g.Node, g.Prev, w, w.Node, w.Prev)
			}
		}
	}
}

func (h *harness) groupSize() int {
	switch h.rng.IntN(4) {
	case 0:
		return 1
	case 1:
		return 1 + h.rng.IntN(8)
	default:
		return 1 + h.rng.IntN(64)
	}
}

func TestDifferential(t *testing.T) {
	// Apply's record cache: the default, one so small it evicts all the
	// time, and none.
	cacheSizes := map[uint64]int64{1: 0, 2: 4 << 10, 3: -1}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newHarness(t, seed)
			h.cfg.CacheSize = cacheSizes[seed]
			h.reopen()
			for h.gen.index < 3000 {
				h.step(h.groupSize())
				h.checkLatest()
				h.checkHistory(3)
				h.checkEvents()
				switch h.rng.IntN(40) {
				case 0:
					h.reopen()
					h.checkLatest()
					h.checkHistory(5)
				case 1:
					h.crashAndReplay(h.groupSize())
					h.checkLatest()
				}
			}
			// Let Badger's own compaction drop what the discard timestamp
			// allows, then read history again.
			h.reopen()
			if err := h.s.db.Flatten(2); err != nil {
				t.Fatalf("flatten: %v", err)
			}
			h.checkLatest()
			h.checkHistory(50)
			for range 20 {
				h.checkEvents()
			}
			if h.meta().CompactRev < 50 {
				t.Fatalf("compact rev only reached %d; the generator should compact more", h.meta().CompactRev)
			}
			if p := h.peak; p.Ephemerals == 0 || p.Sessions == 0 || p.Znodes == 0 {
				t.Fatalf("census peaks %+v: the generator should make znodes, ephemerals and sessions", p)
			}
			t.Logf("census peaks: %+v; at the end: %+v", h.peak, h.s.Census())
		})
	}
}

// crashAndReplay writes a group's batches without its applied index, as a
// crash between the two would leave them, reopens, and applies the group
// again.
func (h *harness) crashAndReplay(n int) {
	h.t.Helper()
	before := h.s.AppliedIndex()
	beforeRev := h.s.Rev()
	entries, want, _ := h.generate(n)
	h.s.crashBeforeApplied = true
	if _, _, err := h.s.Apply(entries); err == nil {
		h.t.Fatal("apply with the crash hook succeeded")
	}
	if h.s.AppliedIndex() != before || h.s.Rev() != beforeRev {
		h.t.Fatalf("a crashed group was published: applied %d rev %d", h.s.AppliedIndex(), h.s.Rev())
	}
	h.reopen()
	if h.s.AppliedIndex() != before || h.s.Rev() != beforeRev {
		h.t.Fatalf("after reopen: applied %d rev %d, want %d %d", h.s.AppliedIndex(), h.s.Rev(), before, beforeRev)
	}
	got, _, err := h.s.Apply(entries)
	if err != nil {
		h.t.Fatalf("replay: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		h.t.Fatal("replayed results differ")
	}
}
