package zab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
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

// TestTrimDoesNotWaitForApply checks that a trim syncs the state machine
// beside an Apply in progress instead of queueing behind it: the store's
// sync takes tens of milliseconds, and every write would wait that long
// once a trim interval.
func TestTrimDoesNotWaitForApply(t *testing.T) {
	sm := &memSM{syncAll: true}
	m := openT(t, Config{Dir: t.TempDir(), SegmentSize: 128}, sm)
	proposeN(t, m, 20)
	sm.gate, sm.entered = make(chan struct{}), make(chan struct{})
	proposed := make(chan error, 1)
	go func() {
		_, err := m.Propose(context.Background(), []byte("held"))
		proposed <- err
	}()
	<-sm.entered
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := m.Trim(ctx)
	close(sm.gate)
	if err != nil {
		t.Fatalf("Trim while an Apply was held: %v", err)
	}
	if got != 20 || m.Status().FirstIndex <= 1 {
		t.Fatalf("Trim covered %d and the log starts at %d, want 20 and segments removed", got, m.Status().FirstIndex)
	}
	if err := <-proposed; err != nil {
		t.Fatalf("the held proposal: %v", err)
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

// Close answers every proposal: one whose entry the log took is applied
// and acknowledged (the applier finishes what it was handed first), any
// other fails with ErrStopped; what was acknowledged is exactly what the
// log holds.
func TestCloseFailsPendingProposals(t *testing.T) {
	dir := t.TempDir()
	sm := &memSM{gate: make(chan struct{}), entered: make(chan struct{})}
	m := openT(t, Config{Dir: dir}, sm)

	type outcome struct {
		data string
		err  error
	}
	const more = 40
	outcomes := make(chan outcome, more+1)
	propose := func(data string) {
		_, err := m.Propose(context.Background(), []byte(data))
		outcomes <- outcome{data, err}
	}
	var wg sync.WaitGroup
	wg.Go(func() { propose("first") })
	<-sm.entered // the applier is now stuck in Apply
	for i := range more {
		wg.Go(func() { propose(fmt.Sprint("more ", i)) })
	}
	for m.Status().LastIndex < 2 { // some of them are in the log
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

	acked := map[string]bool{}
	for o := range outcomes {
		switch {
		case o.err == nil:
			acked[o.data] = true
		case errors.Is(o.err, ErrStopped):
		default:
			t.Errorf("proposal %q: %v", o.data, o.err)
		}
	}
	if !acked["first"] {
		t.Error("the proposal being applied at Close was not acknowledged")
	}
	if _, err := m.Propose(context.Background(), []byte("late")); !errors.Is(err, ErrStopped) {
		t.Errorf("Propose after Close: %v, want ErrStopped", err)
	}
	if !m.Status().Stopped {
		t.Error("status does not say stopped")
	}
	got := readLog(t, dir)
	inLog := map[string]bool{}
	for _, e := range got {
		inLog[string(e.Data)] = true
	}
	if !maps.Equal(inLog, acked) || len(got) != len(acked) {
		t.Fatalf("log holds %d entries, %d were acknowledged; they differ", len(got), len(acked))
	}
	t.Logf("%d of %d proposals acknowledged before Close", len(acked), more+1)
}

// A proposal whose context ended before it reached the log is never
// written, and takes no index.
func TestCancelledBeforeWriteIsNotWritten(t *testing.T) {
	dir := t.TempDir()
	m := openT(t, Config{Dir: dir}, &memSM{})
	proposeT(t, m, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		if _, err := m.Propose(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Propose with a done context: %v", err)
		}
	}
	if r := proposeT(t, m, "b"); r.Index != 2 {
		t.Errorf("index after the cancelled proposals %d, want 2", r.Index)
	}
	closeT(t, m)
	checkLog(t, dir, []string{"a", "b"})
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
	set := make(chan struct{})
	m.rep.inbox <- loopEvent{onLoop: func(c *Core) {
		c.ls.counter = math.MaxUint32 - 1
		close(set)
	}}
	<-set
	// The proposal that finds the counter exhausted is refused (nothing
	// proposed) while the member elects itself again, in a new epoch:
	// until its log is drained, it does not lead.
	proposeT(t, m, "p1")
	if _, err := m.Propose(context.Background(), []byte("refused")); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Propose at the exhausted counter: %v, want ErrNoLeader", err)
	}
	for {
		_, err := m.Propose(context.Background(), []byte("p2"))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Propose after the new election: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	proposeT(t, m, "p3")
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
