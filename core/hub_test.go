package core_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/januskv/janus/core"
)

// memHistory is a History over published batches, with a compact point.
type memHistory struct {
	mu      sync.Mutex
	byRev   map[int64]core.RevEvents
	compact int64
}

func (m *memHistory) Events(from, to int64) ([]core.RevEvents, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if from < m.compact {
		return nil, core.ErrCompacted
	}
	var out []core.RevEvents
	for r := from; r <= to; r++ {
		if re, ok := m.byRev[r]; ok {
			out = append(out, re)
		}
	}
	return out, nil
}

func batchAt(rev int64) *core.Batch {
	return &core.Batch{Rev: rev, Changed: true, Events: []core.Event{{Type: core.EventPut, Node: &core.Node{Key: []byte(fmt.Sprint(rev)), ModRev: rev}}}}
}

func TestHubDeliversEveryRevisionOnceInOrder(t *testing.T) {
	hist := &memHistory{byRev: map[int64]core.RevEvents{}}
	hub := core.NewHub(hist, 1, 4) // tiny buffers force slow subscribers back to history
	defer hub.Close()
	publish := func(from, to int64) {
		for r := from; r <= to; r++ {
			b := batchAt(r)
			hist.mu.Lock()
			hist.byRev[r] = core.RevEvents{Rev: r, Events: b.Events}
			hist.mu.Unlock()
			hub.Publish([]*core.Batch{b, {Rev: r, Changed: false}})
		}
	}
	publish(2, 50)
	type sub struct {
		from int64
		s    *core.Subscription
	}
	var subs []sub
	for _, from := range []int64{0, 2, 10, 50, 51} {
		s, err := hub.Subscribe(from)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub{from, s})
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); publish(51, 600) }()
	for _, sb := range subs {
		want := sb.from
		if want == 0 {
			want = 51
		}
		for want <= 600 {
			re, ok := <-sb.s.Events()
			if !ok {
				t.Fatalf("subscription from %d ended: %v", sb.from, sb.s.Err())
			}
			if re.Rev != want {
				t.Fatalf("subscription from %d: got revision %d, want %d", sb.from, re.Rev, want)
			}
			want++
		}
		sb.s.Close()
	}
	wg.Wait()
}

func TestHubCompactedStart(t *testing.T) {
	hist := &memHistory{byRev: map[int64]core.RevEvents{}, compact: 5}
	hub := core.NewHub(hist, 10, 4)
	defer hub.Close()
	s, err := hub.Subscribe(3)
	if err != nil {
		t.Fatal(err)
	}
	for range s.Events() {
	}
	if !errors.Is(s.Err(), core.ErrCompacted) {
		t.Fatalf("err %v, want compacted", s.Err())
	}
}

func TestHubCloseEndsCatchingUpSubscriptions(t *testing.T) {
	hist := &memHistory{byRev: map[int64]core.RevEvents{}}
	for r := int64(2); r < 100; r++ {
		hist.byRev[r] = core.RevEvents{Rev: r}
	}
	hub := core.NewHub(hist, 99, 1)
	s, _ := hub.Subscribe(2) // never read: its catch-up blocks on a full buffer
	hub.Close()
	if !errors.Is(s.Err(), core.ErrHubClosed) {
		t.Fatalf("err %v", s.Err())
	}
}

// TestHubReplacedEndsSubscriptionsAsClosed: a hub retired by a snapshot
// restore ends its subscriptions with ErrHubReplaced, which readers that
// only tell a closed hub apart still take for one.
func TestHubReplacedEndsSubscriptionsAsClosed(t *testing.T) {
	hub := core.NewHub(&memHistory{byRev: map[int64]core.RevEvents{}}, 1, 1)
	s, err := hub.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	hub.Replaced()
	if _, open := <-s.Events(); open {
		t.Fatal("a subscription of a replaced hub was not ended")
	}
	if !errors.Is(s.Err(), core.ErrHubReplaced) || !errors.Is(s.Err(), core.ErrHubClosed) {
		t.Fatalf("err %v, want ErrHubReplaced, an ErrHubClosed", s.Err())
	}
	if _, err := hub.Subscribe(0); !errors.Is(err, core.ErrHubClosed) {
		t.Fatalf("subscribe to a replaced hub: %v", err)
	}
}
