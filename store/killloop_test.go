package store

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/core/coretest"
)

var storeKills = flag.Int("store.kills", 0, "SIGKILL rounds for TestSIGKILLLoop (0: JANUS_STORE_KILLS, else 3)")

// killChildEnv, when set to "dir seed", makes TestSIGKILLLoop the child
// that applies entries until it is killed.
const killChildEnv = "JANUS_STORE_KILL_CHILD"

// killRounds is how many times TestSIGKILLLoop kills its child:
// -store.kills, else $JANUS_STORE_KILLS (the long form `make chaos` runs),
// else a few.
func killRounds(t *testing.T) int {
	if *storeKills > 0 {
		return *storeKills
	}
	if v := os.Getenv("JANUS_STORE_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("JANUS_STORE_KILLS=%q is not a positive number", v)
		}
		return n
	}
	return 3
}

// killStoreConfig opens the child's store with memtables small enough to
// fill, turn into tables and split big groups into several Badger
// transactions; with gc, value log files small enough to rotate often, so
// that GC has files to rewrite.
func killStoreConfig(dir string, gc bool) Config {
	cfg := Config{Dir: dir, MemTableSize: 1 << 20, BlockCacheSize: 1 << 20}
	if gc {
		cfg.valueLogFileSize = 1 << 20
	}
	return cfg
}

// TestSIGKILLLoop runs a child process that applies a seeded stream of
// realistic entries (core/coretest) in groups of random sizes, resuming,
// as a member replays its log, after the applied index it reopens at, and
// kills it with SIGKILL at a random point, again and again. After each kill
// the store is reopened and its whole state compared with a MemState fed
// the entries up to the applied index it recovered: every node, Dir record,
// child, lease and lease attachment, the meta record, and the event log.
// The applied index must also be at least the last one the child reported
// done. -store.kills (or JANUS_STORE_KILLS) sets the rounds; -store.seed the
// seed.
func TestSIGKILLLoop(t *testing.T) { killLoop(t, "TestSIGKILLLoop", false) }

// TestSIGKILLLoopValueLogGC is TestSIGKILLLoop with half the values big
// enough for the value log and value log GC running beside Apply all the
// time (ReclaimValueLog, and now and then Reclaim), so that kills land
// inside GC's rewrites and deletions too.
func TestSIGKILLLoopValueLogGC(t *testing.T) { killLoop(t, "TestSIGKILLLoopValueLogGC", true) }

func killLoop(t *testing.T, name string, gc bool) {
	if v := os.Getenv(killChildEnv); v != "" {
		runKillChild(v, gc)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seed := testSeed(t)
	ref := newReference(seed)
	if gc {
		ref.inflate = inflateThreshold()
	}
	rounds := killRounds(t)
	ahead, rewrites := 0, 0
	rng := rand.New(rand.NewPCG(seed, 17))
	dir := scratchDir(t)
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", killChildEnv, dir, seed))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of groups, so that the kill lands
		// anywhere in a group's write, a Sync or a memtable flush.
		groups := 3 + rng.IntN(40)
		if gc && rng.IntN(2) == 0 {
			groups = 3 + rng.IntN(300) // long enough for GC to delete files
		}
		var done uint64
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "gc "); ok {
				k, _ := strconv.Atoi(n)
				rewrites += k
				continue
			}
			idx, ok := strings.CutPrefix(line, "applied ")
			if !ok {
				continue
			}
			if done, err = strconv.ParseUint(idx, 10, 64); err != nil {
				t.Fatalf("child said %q", line)
			}
			if groups--; groups == 0 {
				break
			}
		}
		// A random pause lets the kill land inside the next group's
		// write as well as between groups; nothing waits on time.
		time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if groups != 0 {
			t.Fatalf("round %d: the child stopped before it was killed", round)
		}
		s, err := Open(killStoreConfig(dir, gc))
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		got := s.AppliedIndex()
		if got < done {
			t.Fatalf("round %d: recovered applied index %d is below the %d the child had applied", round, got, done)
		}
		ref.check(t, s, fmt.Sprintf("round %d (applied %d)", round, got))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got > done {
			ahead++
		}
		t.Logf("round %d: killed after %d, recovered at %d", round, done, got)
	}
	t.Logf("%d SIGKILL rounds, %d of them recovered past the last group the child reported", rounds, ahead)
	if gc {
		t.Logf("value log GC deleted %d files the children saw (before the kills)", rewrites)
		if rewrites == 0 && rounds >= 10 {
			t.Fatalf("value log GC never deleted a file in %d rounds: the kills never met it", rounds)
		}
	}
}

// runKillChild applies entries to the store in dir until it is killed;
// with gc, with values inflated for the value log and value log GC running
// beside it.
func runKillChild(arg string, gc bool) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "kill child:", err)
		os.Exit(2)
	}
	dir, seedText, _ := strings.Cut(arg, " ")
	seed, err := strconv.ParseUint(seedText, 10, 64)
	if err != nil {
		fail(err)
	}
	s, err := Open(killStoreConfig(dir, gc))
	if err != nil {
		fail(err)
	}
	gen := coretest.NewGenerator(seed)
	applied := s.AppliedIndex()
	gen.Entries(int(applied))
	rng := rand.New(rand.NewPCG(seed, applied))
	inflate := 0
	if gc {
		inflate = inflateThreshold()
		go func() {
			// Reclaim flattens the tables first, which is where the
			// discard counts GC picks files by come from. The child
			// reports the value log files that GC deleted.
			seen := map[string]bool{}
			for i := 0; ; i++ {
				_, err := s.ReclaimValueLog()
				if i%8 == 7 {
					err = s.Reclaim()
				}
				if err != nil {
					fail(err)
				}
				files, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
				now := map[string]bool{}
				for _, f := range files {
					now[f] = true
				}
				gone := 0
				for f := range seen {
					if !now[f] {
						gone++
					}
				}
				seen = now
				if gone > 0 {
					fmt.Printf("gc %d\n", gone)
				}
			}
		}()
	}
	for n := 0; ; n++ {
		size := 1 + rng.IntN(64)
		if gc {
			size = 1 + rng.IntN(16)
		} else if rng.IntN(20) == 0 {
			size = 1500 + rng.IntN(1500) // more than one Badger transaction
		}
		entries := gen.Entries(size)
		for i := range entries {
			inflateEntry(&entries[i], inflate)
		}
		if _, _, err := s.Apply(entries); err != nil {
			fail(err)
		}
		if n%16 == 15 {
			if _, err := s.Sync(); err != nil {
				fail(err)
			}
		}
		fmt.Printf("applied %d\n", s.AppliedIndex())
	}
}

// inflateThreshold is the value threshold of the GC child's store.
func inflateThreshold() int {
	cfg := killStoreConfig("", true)
	return int(valueThreshold(cfg.MemTableSize))
}

// inflateEntry makes about half the values an entry writes big enough for
// a value log of the given threshold (none if it is 0), deterministically,
// so that the child and the reference write the same.
func inflateEntry(e *core.Entry, threshold int) {
	if threshold == 0 || e.Op.Txn == nil {
		return
	}
	var txn func(*core.Txn)
	txn = func(t *core.Txn) {
		for _, ops := range [][]core.TxnOp{t.Success, t.Failure} {
			for i := range ops {
				op := &ops[i]
				switch op.Kind {
				case core.OpPut, core.OpCreate, core.OpSetData:
					if v := op.Value; len(v) > 0 && v[0] < 'n' {
						op.Value = append(bytes.Repeat(v[:1], threshold+100*len(v)), v...)
					}
				case core.OpTxn:
					txn(op.Txn)
				}
			}
		}
	}
	txn(e.Op.Txn)
}

// reference is a MemState fed the seeded entries, with what the checks
// need from the batches: the event log and every path that had a Dir.
type reference struct {
	// inflate is the threshold inflateEntry makes values big for (0: none).
	inflate int
	gen     *coretest.Generator
	mem     *core.MemState
	events  map[int64][]core.Event
	dirs    [][]byte
	seen    map[string]bool
}

func newReference(seed uint64) *reference {
	return &reference{gen: coretest.NewGenerator(seed), mem: core.NewMemState(), events: map[int64][]core.Event{}, seen: map[string]bool{}}
}

// advance feeds the MemState the entries up to index.
func (r *reference) advance(t *testing.T, index uint64) {
	t.Helper()
	for r.mem.AppliedIndex() < index {
		e := r.gen.Next()
		inflateEntry(&e, r.inflate)
		_, b, err := r.mem.ApplyEntry(&e)
		if err != nil {
			t.Fatalf("MemState apply %d: %v", e.Index, err)
		}
		for _, w := range b.Dirs {
			if !r.seen[string(w.Path)] {
				r.seen[string(w.Path)] = true
				r.dirs = append(r.dirs, w.Path)
			}
		}
		if b.Changed {
			r.events[b.Rev] = b.Events
		}
	}
}

// check compares the store's whole state with the MemState advanced to
// the store's applied index.
func (r *reference) check(t *testing.T, s *Store, what string) {
	t.Helper()
	r.advance(t, s.AppliedIndex())
	if r.mem.AppliedIndex() != s.AppliedIndex() {
		t.Fatalf("%s: applied index %d went back below %d", what, s.AppliedIndex(), r.mem.AppliedIndex())
	}
	mem, events, dirs := r.mem, r.events, r.dirs
	v, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	meta, _ := mem.Meta()
	if v.Rev() != meta.Rev {
		t.Fatalf("%s: revision %d, want %d", what, v.Rev(), meta.Rev)
	}
	// Meta, every node, every live Dir record and its children, every
	// lease and its keys.
	if core.HashView(v, dirs) != core.HashView(mem, dirs) {
		t.Fatalf("%s: state differs from the MemState", what)
	}
	var live, listed [][]byte
	for _, p := range dirs {
		if d, _ := mem.Dir(p); d != nil {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, bytes.Compare)
	if err := v.Dirs(func(p []byte) bool { listed = append(listed, p); return true }); err != nil {
		t.Fatal(err)
	}
	if len(live)+len(listed) > 0 && !reflect.DeepEqual(listed, live) {
		t.Fatalf("%s: Dir records %q, want %q", what, listed, live)
	}
	// No child index entry or lease attachment beyond those: count them
	// all, wherever they hang.
	count := func(prefix byte) int {
		n := 0
		err := v.scan([]byte{prefix}, []byte{prefix}, nil, func([]byte, *badger.Item) (bool, error) { n++; return true, nil })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wantChildren, wantAttached := 0, 0
	for _, p := range live {
		_ = mem.Children(p, func([]byte) bool { wantChildren++; return true })
	}
	_ = mem.Leases(func(l *core.Lease) bool {
		_ = mem.LeaseKeys(l.ID, func([]byte) bool { wantAttached++; return true })
		return true
	})
	if got := count(prefixChild); got != wantChildren {
		t.Fatalf("%s: %d child index records, want %d", what, got, wantChildren)
	}
	if got := count(prefixLeaseKey); got != wantAttached {
		t.Fatalf("%s: %d lease attachments, want %d", what, got, wantAttached)
	}
	// The event log, from the oldest revision it still serves.
	_, floor := s.hist.floors()
	floor = max(floor, 2)
	got, err := s.Events(floor, 0)
	if err != nil {
		t.Fatalf("%s: Events(%d): %v", what, floor, err)
	}
	if len(got) != int(meta.Rev-floor+1) && meta.Rev >= floor {
		t.Fatalf("%s: Events(%d) gave %d revisions, want %d", what, floor, len(got), meta.Rev-floor+1)
	}
	for _, re := range got {
		want := events[re.Rev]
		if len(re.Events) != len(want) {
			t.Fatalf("%s: revision %d has %d events, want %d", what, re.Rev, len(re.Events), len(want))
		}
		for j, w := range want {
			g := re.Events[j]
			if g.Type != w.Type || g.Implicit != w.Implicit || !sameNode(g.Node, w.Node) || !sameNode(g.Prev, w.Prev) {
				t.Fatalf("%s: revision %d event %d: got %+v, want %+v", what, re.Rev, j, g, w)
			}
		}
	}
	// Revisions below the floor are never read again: forgetting them
	// keeps a long run's big values out of memory.
	for rev := range events {
		if rev < floor {
			delete(events, rev)
		}
	}
}
