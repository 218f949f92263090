package zab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestTransferLeadership hands the leadership of three voters (and an
// observer) to each voter in turn, the current leader included, while a
// writer proposes all along: each transfer returns once its target leads
// a later epoch, the writer is refused only with "nothing proposed" or
// "outcome unknown" errors, and every acknowledged write is applied
// everywhere in one order. Transfers to the observer, to a stranger and
// on a follower are refused.
func TestTransferLeadership(t *testing.T) {
	c := newCluster(t, 3, 1)
	c.tweak = func(cfg *Config) {
		// Long enough that a loaded machine does not end a transfer by its
		// deadline (an election timeout to catch up, two to lead).
		cfg.ElectionTimeout = time.Second
	}
	c.startAll()
	first := c.leader()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			id := c.ids()[i%4]
			data := fmt.Sprintf("w%d", i)
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.nodes[id].m.Propose(pctx, []byte(data))
			pcancel()
			switch {
			case err == nil:
				mu.Lock()
				acked = append(acked, data)
				mu.Unlock()
			case ctx.Err() != nil:
				return
			case !retryable(err):
				t.Errorf("propose %q on %d: %v", data, id, err)
				return
			}
		}
	}()

	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer tcancel()
	follower := c.ids()[0]
	if follower == first {
		follower = c.ids()[1]
	}
	refusals := []struct {
		on, target uint64
		want       error
	}{
		{first, 4, ErrBadTransferee},
		{first, 9, ErrBadTransferee},
		{follower, first, ErrNotLeader},
	}
	for _, r := range refusals {
		if err := c.nodes[r.on].m.TransferLeadership(tctx, r.target); !errors.Is(err, r.want) {
			t.Fatalf("transfer on %d to %d: %v, want %v", r.on, r.target, err, r.want)
		}
	}
	if err := c.nodes[first].m.TransferLeadership(tctx, first); err != nil {
		t.Fatalf("transfer to the leader itself: %v", err)
	}

	l := first
	for _, target := range []uint64{1, 2, 3, first} {
		if target == l {
			continue
		}
		before := c.nodes[l].m.Status().Epoch
		if err := c.nodes[l].m.TransferLeadership(tctx, target); err != nil {
			t.Fatalf("transfer from %d to %d: %v", l, target, err)
		}
		// The old leader returned once it followed target in a later epoch.
		st := c.nodes[l].m.Status()
		if st.LeaderID != target || st.Epoch <= before {
			t.Fatalf("after the transfer from %d (epoch %d) to %d, member %d reports %+v", l, before, target, l, st)
		}
		if got := c.leader(); got != target {
			t.Fatalf("transferred to %d, but %d leads", target, got)
		}
		t.Logf("transferred from %d to %d: epoch %d to %d", l, target, before, st.Epoch)
		l = target
	}
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	// A last write through the leader, so that every member converges on
	// everything before it.
	last := c.propose(l, "last")
	hist := c.converge(last.Index)
	for _, w := range acked {
		if !slices.Contains(hist, w) {
			t.Fatalf("acknowledged write %q is not in the applied history", w)
		}
	}
	t.Logf("%d writes acknowledged during the transfers; %d entries applied", len(acked), len(hist))
}

// TestTransferLeadershipSingle: a single member is the one voter of its
// ensemble; a transfer to itself succeeds, to anyone else is refused.
func TestTransferLeadershipSingle(t *testing.T) {
	m, err := Open(Config{Dir: t.TempDir()}, indexSM{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if err := m.TransferLeadership(ctx, 1); err != nil {
		t.Fatalf("transfer to itself: %v", err)
	}
	if err := m.TransferLeadership(ctx, 2); !errors.Is(err, ErrBadTransferee) {
		t.Fatalf("transfer to a stranger: %v, want ErrBadTransferee", err)
	}
}
