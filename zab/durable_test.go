package zab

import (
	"sync/atomic"
	"testing"
)

// earlySM is a memSM that takes groups before their flush and applies
// them only once told they are durable.
type earlySM struct {
	memSM
	early atomic.Int64 // groups taken before their flush
}

func (s *earlySM) ApplyWhen(entries []Entry, durable func() error) ([]any, error) {
	s.early.Add(1)
	if err := durable(); err != nil {
		return nil, err
	}
	return s.memSM.Apply(entries)
}

// TestDurableWaiterAppliesDuringTheFlush checks that a single member hands
// an idle DurableWaiter each group between its write and its flush, that
// every proposer still gets its own result in order, and that restarting
// replays exactly what was acknowledged.
func TestDurableWaiterAppliesDuringTheFlush(t *testing.T) {
	dir := t.TempDir()
	sm := &earlySM{}
	m := openT(t, Config{Dir: dir, SegmentSize: 1 << 20}, sm)
	const proposers, each = 8, 25
	proposeFromMany(t, m, proposers, each)
	if sm.early.Load() == 0 {
		t.Fatal("no group was handed to the state machine before its flush")
	}
	st := m.Status()
	if st.CommittedIndex != proposers*each || st.AppliedIndex != proposers*each {
		t.Errorf("status %+v, want committed and applied %d", st, proposers*each)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Everything is in the log: a fresh state machine replays all of it.
	again := &memSM{}
	m2 := openT(t, Config{Dir: dir, SegmentSize: 1 << 20}, again)
	defer m2.Close()
	if got := len(again.snapshot()); got != proposers*each {
		t.Fatalf("replay applied %d entries, want %d", got, proposers*each)
	}
}
