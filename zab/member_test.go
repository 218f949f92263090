package zab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConcurrentProposersGetTheirOwnResultsInOrder(t *testing.T) {
	const proposers, each = 32, 40
	sm := &memSM{}
	m := openT(t, Config{Dir: t.TempDir()}, sm)

	proposeFromMany(t, m, proposers, each)
	st := m.Status()
	if st.CommittedIndex != proposers*each || st.AppliedIndex != proposers*each {
		t.Errorf("status %+v, want committed and applied %d", st, proposers*each)
	}
	if st.Role != RoleLeader || st.Epoch != 1 || ZxidEpoch(st.LastZxid) != 1 {
		t.Errorf("status %+v, want leader in epoch 1", st)
	}
	if got := len(sm.snapshot()); got != proposers*each {
		t.Errorf("state machine applied %d entries, want %d", got, proposers*each)
	}
}

func TestReplayDeliversExactlyTheEntriesAfterAppliedIndex(t *testing.T) {
	for _, appliedIndex := range []uint64{0, 1, 4, 9, 10} {
		t.Run(fmt.Sprint("applied=", appliedIndex), func(t *testing.T) {
			dir := t.TempDir()
			first := &memSM{}
			m := openT(t, Config{Dir: dir, SegmentSize: 200}, first) // several segments
			proposeN(t, m, 10)
			closeT(t, m)
			written := first.snapshot()

			second := &memSM{start: appliedIndex}
			m = openT(t, Config{Dir: dir, SegmentSize: 200}, second)
			got := second.snapshot()
			want := written[appliedIndex:]
			if len(got) != len(want) {
				t.Fatalf("replayed %d entries, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Index != want[i].Index || got[i].Zxid != want[i].Zxid ||
					got[i].Time != want[i].Time || string(got[i].Data) != string(want[i].Data) {
					t.Errorf("replayed %+v, want %+v", got[i], want[i])
				}
			}
			// The log continues where it left off, in a new epoch.
			r := proposeT(t, m, "after restart")
			if r.Index != 11 {
				t.Errorf("first index after restart %d, want 11", r.Index)
			}
			if st := m.Status(); st.Epoch != 2 || st.LastZxid != MakeZxid(2, 1) {
				t.Errorf("status after restart %+v, want epoch 2, last zxid %s", st, FormatZxid(MakeZxid(2, 1)))
			}
		})
	}
}

func TestIndexAndZxidNeverGoBackAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	var lastZxid uint64
	var want []string
	for round := 1; round <= 3; round++ {
		sm := &memSM{syncAll: true}
		m := openT(t, Config{Dir: dir, SegmentSize: 128}, sm)
		for i := range 5 {
			data := fmt.Sprintf("r%d-%d", round, i)
			want = append(want, data)
			r := proposeT(t, m, data)
			if r.Index != uint64(len(want)) {
				t.Fatalf("round %d: index %d, want %d", round, r.Index, len(want))
			}
			z := m.Status().LastZxid
			if z <= lastZxid {
				t.Fatalf("round %d: zxid %s after %s", round, FormatZxid(z), FormatZxid(lastZxid))
			}
			lastZxid = z
		}
		if ep := m.Status().Epoch; ep != uint32(round) {
			t.Errorf("round %d: epoch %d", round, ep)
		}
		closeT(t, m)
	}
	checkLog(t, dir, want)
}

func TestStateMachineAheadOfLogStartsAfterIt(t *testing.T) {
	dir := t.TempDir()
	m := openT(t, Config{Dir: dir}, &memSM{})
	proposeN(t, m, 3)
	closeT(t, m)

	// As if the state machine were restored from a snapshot taken at 50.
	sm := &memSM{start: 50}
	m = openT(t, Config{Dir: dir}, sm)
	if got := len(sm.snapshot()); got != 0 {
		t.Fatalf("replayed %d entries into a state machine that holds them all", got)
	}
	if r := proposeT(t, m, "next"); r.Index != 51 {
		t.Fatalf("next index %d, want 51", r.Index)
	}
	if st := m.Status(); st.FirstIndex != 51 || st.Epoch != 2 {
		t.Fatalf("status %+v, want first index 51, epoch 2", st)
	}
}

func TestLogBehindStateMachineIsRefused(t *testing.T) {
	dir := t.TempDir()
	sm := &memSM{syncAll: true}
	m := openT(t, Config{Dir: dir, SegmentSize: 128}, sm)
	proposeN(t, m, 20)
	if _, err := m.Trim(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := m.Status().FirstIndex
	closeT(t, m)
	if first <= 1 {
		t.Fatalf("trim removed nothing (first index %d)", first)
	}
	// A state machine that lost what the trimmed segments held.
	_, err := Open(Config{Dir: dir}, &memSM{start: first - 2})
	if err == nil || !strings.Contains(err.Error(), "are gone") {
		t.Fatalf("Open with a gap before the log: %v, want an error about missing entries", err)
	}
}

func TestTrimNeverRemovesUnsyncedEntries(t *testing.T) {
	const n = 60
	for _, synced := range []uint64{0, 1, 17, 37, 59, n} {
		t.Run(fmt.Sprint("synced=", synced), func(t *testing.T) {
			dir := t.TempDir()
			sm := &memSM{}
			m := openT(t, Config{Dir: dir, SegmentSize: 150}, sm)
			proposeN(t, m, n)
			before := m.Status().Segments
			sm.setSynced(synced)
			got, err := m.Trim(context.Background())
			if err != nil {
				t.Fatalf("Trim: %v", err)
			}
			if got != synced {
				t.Errorf("Trim reports %d, want %d", got, synced)
			}
			st := m.Status()
			if st.FirstIndex > synced+1 {
				t.Fatalf("log now starts at %d but only %d was synced", st.FirstIndex, synced)
			}
			// Trimming removes every whole segment it may: what is left
			// starts in the segment holding synced+1 (or the active one).
			if synced >= 20 && st.Segments >= before {
				t.Errorf("segments %d before and %d after trimming through %d", before, st.Segments, synced)
			}
			// Every unsynced entry is still readable.
			var seen []uint64
			if err := m.wal.read(synced+1, n, 7, func(b []Entry) error {
				for _, e := range b {
					seen = append(seen, e.Index)
				}
				return nil
			}); err != nil {
				t.Fatalf("reading %d-%d after trim: %v", synced+1, n, err)
			}
			if len(seen) != int(n-synced) {
				t.Fatalf("read %d entries after trim, want %d", len(seen), n-synced)
			}
			closeT(t, m)
			// And a restart from the synced point replays them.
			again := &memSM{start: synced}
			m = openT(t, Config{Dir: dir, SegmentSize: 150}, again)
			if got := len(again.snapshot()); got != int(n-synced) {
				t.Fatalf("replayed %d entries, want %d", got, n-synced)
			}
		})
	}
}

func TestTrimRefusesSyncAboveApplied(t *testing.T) {
	sm := &memSM{}
	m := openT(t, Config{Dir: t.TempDir(), SegmentSize: 100}, sm)
	proposeN(t, m, 10)
	segs := m.Status().Segments
	sm.setSynced(11)
	if _, err := m.Trim(context.Background()); err == nil {
		t.Fatal("Trim accepted a Sync index above the applied index")
	}
	if got := m.Status().Segments; got != segs {
		t.Fatalf("segments %d → %d after a refused trim", segs, got)
	}
}

func TestBackgroundTrim(t *testing.T) {
	sm := &memSM{syncAll: true}
	m := openT(t, Config{Dir: t.TempDir(), SegmentSize: 100, TrimInterval: time.Millisecond}, sm)
	proposeN(t, m, 30)
	// Waits for the trimmer to act; this only bounds how long we wait.
	deadline := time.Now().Add(30 * time.Second)
	for m.Status().Segments > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("background trim never ran: %+v", m.Status())
		}
		time.Sleep(2 * time.Millisecond)
	}
	closeT(t, m)
}

func TestCloseFailsPendingProposals(t *testing.T) {
	dir := t.TempDir()
	sm := &memSM{gate: make(chan struct{}), entered: make(chan struct{})}
	m := openT(t, Config{Dir: dir}, sm)

	type outcome struct {
		data string
		val  any
		err  error
	}
	outcomes := make(chan outcome, 100)
	propose := func(data string) {
		v, err := m.Propose(context.Background(), []byte(data))
		outcomes <- outcome{data, v, err}
	}
	var wg sync.WaitGroup
	wg.Go(func() { propose("first") })
	<-sm.entered // the applier is now stuck in Apply
	// "second" waits in the pipeline; the writer writes "third" and blocks
	// handing it over, so everything after stays queued, unwritten.
	for i, data := range []string{"second", "third"} {
		wg.Go(func() { propose(data) })
		for m.Status().CommittedIndex < uint64(i+2) {
			time.Sleep(time.Millisecond)
		}
	}
	const queued = 40
	for i := range queued {
		wg.Go(func() { propose(fmt.Sprint("queued ", i)) })
	}
	for len(m.proposals) < queued {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error)
	go func() { closed <- m.Close() }()
	<-m.stopCh
	close(sm.gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	close(outcomes)

	var acked []string
	stopped := 0
	for o := range outcomes {
		switch {
		case o.err == nil:
			acked = append(acked, o.data)
		case errors.Is(o.err, ErrStopped):
			stopped++
		default:
			t.Errorf("proposal %q: %v", o.data, o.err)
		}
	}
	slices.Sort(acked)
	if want := []string{"first", "second", "third"}; !slices.Equal(acked, want) {
		t.Errorf("acknowledged %q, want %q", acked, want)
	}
	if stopped != queued {
		t.Errorf("%d proposals failed with ErrStopped, want the %d queued ones", stopped, queued)
	}
	if _, err := m.Propose(context.Background(), []byte("late")); !errors.Is(err, ErrStopped) {
		t.Errorf("Propose after Close: %v, want ErrStopped", err)
	}
	if !m.Status().Stopped {
		t.Error("status does not say stopped")
	}
	// What was acknowledged is exactly what the log holds: written groups
	// were applied and answered, the rest never written.
	got := readLog(t, dir)
	if len(got) != len(acked) {
		t.Fatalf("log holds %d entries, %d were acknowledged", len(got), len(acked))
	}
	inLog := map[string]bool{}
	for _, e := range got {
		inLog[string(e.Data)] = true
	}
	for _, a := range acked {
		if !inLog[a] {
			t.Errorf("acknowledged %q is not in the log", a)
		}
	}
}

func TestCancelledBeforeWriteIsNotWritten(t *testing.T) {
	dir := t.TempDir()
	sm := &memSM{gate: make(chan struct{}), entered: make(chan struct{})}
	m := openT(t, Config{Dir: dir}, sm)

	results := make(chan error, 3)
	go func() { _, err := m.Propose(context.Background(), []byte("a")); results <- err }()
	<-sm.entered
	go func() { _, err := m.Propose(context.Background(), []byte("b")); results <- err }()
	go func() {
		for m.Status().CommittedIndex < 2 {
			time.Sleep(time.Millisecond)
		}
		_, err := m.Propose(context.Background(), []byte("c"))
		results <- err
	}()
	// a is being applied, b waits in the pipeline, c is written and the
	// writer is blocked handing it over: the next proposal stays queued.
	for m.Status().CommittedIndex < 3 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error)
	go func() { _, err := m.Propose(ctx, []byte("cancelled")); cancelled <- err }()
	for len(m.proposals) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Propose: %v", err)
	}
	close(sm.gate)
	for range 3 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if r := proposeT(t, m, "d"); r.Index != 4 {
		t.Errorf("index after the cancelled proposal %d, want 4", r.Index)
	}
	closeT(t, m)
	checkLog(t, dir, []string{"a", "b", "c", "d"})

	// A context that is already done never reaches the log.
	m = openT(t, Config{Dir: dir}, &memSM{start: 4})
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := m.Propose(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Propose with a done context: %v", err)
	}
	if st := m.Status(); st.CommittedIndex != 4 {
		t.Fatalf("committed index %d after a cancelled proposal, want 4", st.CommittedIndex)
	}
}

func TestApplyErrorStopsTheMember(t *testing.T) {
	sm := &memSM{failAt: 3}
	m := openT(t, Config{Dir: t.TempDir()}, sm)
	proposeN(t, m, 2)
	_, err := m.Propose(context.Background(), []byte("fails"))
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Propose of the failing entry: %v, want ErrStopped with the cause", err)
	}
	<-m.Done()
	if m.Err() == nil {
		t.Fatal("Err is nil after a fatal apply error")
	}
	if _, err := m.Propose(context.Background(), []byte("after")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose after a fatal error: %v", err)
	}
	if _, err := m.Trim(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Trim after a fatal error: %v", err)
	}
}

func TestOpenRefusesALockedDirectory(t *testing.T) {
	dir := t.TempDir()
	m := openT(t, Config{Dir: dir}, &memSM{})
	if _, err := Open(Config{Dir: dir}, &memSM{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open of one directory: %v", err)
	}
	closeT(t, m)
	m = openT(t, Config{Dir: dir}, &memSM{}) // the lock is released on Close
	closeT(t, m)
}

func TestProposeRejectsOversizedEntries(t *testing.T) {
	m := openT(t, Config{Dir: t.TempDir(), MaxEntrySize: 10}, &memSM{})
	if _, err := m.Propose(context.Background(), make([]byte, 11)); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("Propose of 11 bytes with a 10-byte limit: %v", err)
	}
	proposeT(t, m, "0123456789")
}

func TestCounterExhaustionStartsANewEpoch(t *testing.T) {
	dir := t.TempDir()
	m := openT(t, Config{Dir: dir}, &memSM{})
	// Set before the first proposal is sent, which orders it before the
	// writer reads it.
	m.counter = math.MaxUint32 - 1
	proposeN(t, m, 3)
	st := m.Status()
	if st.Epoch != 2 || st.LastZxid != MakeZxid(2, 2) {
		t.Fatalf("status %+v, want epoch 2 and last zxid %s", st, FormatZxid(MakeZxid(2, 2)))
	}
	closeT(t, m)
	ep, err := readEpochs(dir)
	if err != nil || ep.Current != 2 || ep.Accepted != 2 {
		t.Fatalf("persisted epochs %+v, %v; want 2", ep, err)
	}
	got := checkLog(t, dir, payloads(3))
	if got[0].Zxid != MakeZxid(1, math.MaxUint32) {
		t.Errorf("first zxid %s", FormatZxid(got[0].Zxid))
	}
}

func TestEntryTimeComesFromTheClockAndNeverGoesBack(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(5_000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(ms int64) { mu.Lock(); now = time.UnixMilli(ms); mu.Unlock() }

	dir := t.TempDir()
	m := openT(t, Config{Dir: dir, Clock: clock}, &memSM{})
	proposeT(t, m, "a")
	set(4_000) // the wall clock steps back
	proposeT(t, m, "b")
	set(9_000)
	proposeT(t, m, "c")
	closeT(t, m)
	set(1_000) // and is behind after a restart too
	m = openT(t, Config{Dir: dir, Clock: clock}, &memSM{start: 3})
	proposeT(t, m, "d")
	closeT(t, m)

	var times []int64
	for _, e := range checkLog(t, dir, []string{"a", "b", "c", "d"}) {
		times = append(times, e.Time)
	}
	if want := []int64{5_000, 5_000, 9_000, 9_000}; fmt.Sprint(times) != fmt.Sprint(want) {
		t.Fatalf("entry times %v, want %v", times, want)
	}
}
