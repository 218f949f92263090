package zab

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

var (
	longRun      = flag.Bool("zab.long", false, "run the randomized replication test for -zab.long.duration instead of a few seconds (make chaos)")
	longDuration = flag.Duration("zab.long.duration", time.Minute, "how long the long randomized replication test runs")
)

// TestChaos runs writers on every member of a 5-member ensemble while
// members crash and restart (some with wiped disks, see
// othersHoldCommitted), the network drops,
// duplicates and delays messages, and minorities are cut off; then it
// heals everything and checks that every member applied the same
// gap-free history holding every acknowledged write exactly once. It runs
// a few seconds in make test and -zab.long.duration with -zab.long (make
// chaos); -zab.seed replays a logged seed.
func TestChaos(t *testing.T) {
	duration := 5 * time.Second
	if *longRun {
		duration = *longDuration
	}
	c := newCluster(t, 5, 1)
	c.tweak = func(cfg *Config) { cfg.TrimInterval = time.Second }
	c.startAll()
	c.leader()
	rng := rand.New(rand.NewPCG(c.seed, 1))
	var mu sync.Mutex // guards node restarts against writers
	var acked sync.Map
	var nAcked, nFailed int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range c.ids() {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				m := c.nodes[id].m
				mu.Unlock()
				if m == nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				data := fmt.Sprintf("w%d-%d", id, i)
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				_, err := m.Propose(ctx, []byte(data))
				cancel()
				mu.Lock()
				if err == nil {
					acked.Store(data, true)
					nAcked++
				} else {
					nFailed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // no leader yet: do not spin
				}
			}
		})
	}
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		ids := c.ids()
		switch rng.IntN(4) {
		case 0: // crash and restart one member, sometimes with a wiped disk
			id := ids[rng.IntN(len(ids))]
			wipe := rng.IntN(4) == 0
			mu.Lock()
			c.stop(id)
			mu.Unlock()
			if wipe {
				c.othersHoldCommitted(id)
				c.wipe(id)
			}
			mu.Lock()
			c.start(id)
			mu.Unlock()
		case 1: // cut off a minority
			rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			c.net.Partition(ids[:2], ids[2:])
		case 2:
			c.net.SetFaults(Faults{Drop: 0.05, Duplicate: 0.1, MaxDelay: 5 * time.Millisecond})
		case 3:
			c.net.Heal()
			c.net.SetFaults(Faults{})
		}
	}
	close(stop)
	wg.Wait()
	c.net.Heal()
	c.net.SetFaults(Faults{})
	l := c.leader()
	last := c.propose(l, "final")
	got := c.converge(last.Index)
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Fatalf("%q applied twice", p)
		}
		seen[p] = true
	}
	acked.Range(func(k, _ any) bool {
		if !seen[k.(string)] {
			t.Errorf("acknowledged %q is missing", k)
		}
		return true
	})
	if nAcked == 0 {
		t.Errorf("no write was acknowledged in %v: nothing was checked", duration)
	}
	t.Logf("%d writes acknowledged, %d failed or timed out, %d entries applied", nAcked, nFailed, len(got))
}

// othersHoldCommitted waits, with the network healed, until every member
// but the stopped one has applied everything committed. Only then may the
// stopped member lose its disk: a wiped voter rejoins with an empty log and
// votes, so an entry committed on a quorum that included it could
// otherwise survive on too few disks for every later quorum to hold it.
// Zab (as ZooKeeper, and Raft without learners) tolerates a lost disk only
// as a lost member whose data the others still have; a test that wipes
// more fails for the test's reason, not the protocol's.
func (c *cluster) othersHoldCommitted(stopped uint64) {
	c.t.Helper()
	c.net.Heal()
	c.net.SetFaults(Faults{})
	var others []uint64
	for _, id := range c.ids() {
		if id != stopped && c.nodes[id].m != nil {
			others = append(others, id)
		}
	}
	l := c.leader(others...)
	committed := c.nodes[l].m.Status().CommittedIndex
	for _, id := range others {
		m := c.nodes[id].m
		eventually(c.t, fmt.Sprintf("member %d to apply index %d before %d loses its disk", id, committed, stopped), func() bool {
			return m.Status().AppliedIndex >= committed
		})
	}
}
