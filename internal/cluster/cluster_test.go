package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// chaosDuration is how long the fault schedule repeats: once in make test,
// for $JANUS_CHAOS_DURATION under make chaos.
func chaosDuration(t *testing.T) time.Duration {
	if s := os.Getenv("JANUS_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("JANUS_CHAOS_DURATION: %v", err)
		}
		return d
	}
	return 0
}

// waitLeader waits until the ensemble has a leader that every running
// member follows. It returns an error rather than failing the test: fault
// injectors call it outside the test's goroutine.
func waitLeader(c *Cluster) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.WaitLeader(ctx)
}

// mustLeader is waitLeader for the test's own goroutine.
func mustLeader(t *testing.T, c *Cluster) int {
	t.Helper()
	l, err := waitLeader(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// minPerFault is how many definite answers of each kind the workload must
// get after each fault heals, before the next fault starts.
const minPerFault = 3

// TestClusterFaults runs the two-face workload on a 3-member ensemble
// while it goes through every fault the issue names: the leader killed
// and restarted, the leader partitioned away (SIGSTOP stands in for a
// partition), a follower killed and restarted, one follower partitioned
// (a minority), and two members partitioned (the member left has no
// quorum). After each fault the workload must make progress of every
// kind; at the end the histories must be linearizable, no acknowledged
// write lost, per-client revisions monotonic, watches gap-free, lock
// tokens unique.
func TestClusterFaults(t *testing.T) {
	c := Start(t, Options{Binary: binary, Nodes: 3})
	mustLeader(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	w := Workload{EtcdEndpoints: c.EtcdEndpoints(), ZKServers: c.ZKServers()}
	res := w.Start(ctx, t)
	faultErr := make(chan error, 1)
	// Even when the test fails early, its clients and the fault injector
	// stop before it returns (deferred calls run last to first).
	defer res.Wait()
	defer cancel()
	end := time.Now().Add(chaosDuration(t))
	go func() {
		defer cancel()
		for round := 0; round == 0 || time.Now().Before(end); round++ {
			if err := faultRound(t, c, res); err != nil {
				faultErr <- fmt.Errorf("fault round %d: %w", round, err)
				return
			}
			t.Logf("fault round %d done", round)
		}
		faultErr <- nil
	}()
	res.Wait()
	if err := <-faultErr; err != nil {
		t.Fatal(err)
	}
	res.Check(t)
}

// faultRound injects each fault once and, after each, waits until the
// workload has made progress of every kind again. It runs outside the
// test's goroutine, so it returns what went wrong instead of failing t.
func faultRound(t *testing.T, c *Cluster, res *Results) error {
	step := func(name string, f func() error) error {
		t.Logf("fault: %s", name)
		before := res.Acks()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := res.WaitProgress(ctx, before, minPerFault); err != nil {
			return fmt.Errorf("after %s: %w", name, err)
		}
		return nil
	}
	other := func(not ...int) int {
		for i := range c.Nodes {
			if !slices.Contains(not, i) {
				return i
			}
		}
		return -1
	}
	steps := []struct {
		name string
		f    func() error
	}{
		{"kill the leader, restart it", func() error {
			l, err := waitLeader(c)
			if err != nil {
				return err
			}
			c.Kill(l)
			time.Sleep(1500 * time.Millisecond)
			return c.Restart(l)
		}},
		{"partition the leader away", func() error {
			l, err := waitLeader(c)
			if err != nil {
				return err
			}
			c.Pause(l)
			time.Sleep(3 * time.Second)
			c.Resume(l)
			return nil
		}},
		{"kill a follower, restart it", func() error {
			l, err := waitLeader(c)
			if err != nil {
				return err
			}
			f := other(l)
			c.Kill(f)
			time.Sleep(1500 * time.Millisecond)
			return c.Restart(f)
		}},
		{"partition a follower (minority)", func() error {
			l, err := waitLeader(c)
			if err != nil {
				return err
			}
			f := other(l)
			c.Pause(f)
			time.Sleep(2 * time.Second)
			c.Resume(f)
			return nil
		}},
		{"partition two members (majority)", func() error {
			l, err := waitLeader(c)
			if err != nil {
				return err
			}
			a, b := l, other(l)
			c.Pause(a)
			c.Pause(b)
			time.Sleep(2 * time.Second)
			c.Resume(a)
			c.Resume(b)
			return nil
		}},
	}
	for _, s := range steps {
		if err := step(s.name, s.f); err != nil {
			return err
		}
	}
	return nil
}

// TestClusterWipedMemberRejoins restarts a follower with an empty data
// dir: it must catch up by SNAP (the leader sends a snapshot to a member
// missing more than --max-diff-entries) and serve every acknowledged write.
func TestClusterWipedMemberRejoins(t *testing.T) {
	c := Start(t, Options{Binary: binary, Nodes: 3, Args: []string{"--max-diff-entries", "50"}})
	l := mustLeader(t, c)
	cli := etcdClient(t, c.EtcdEndpoints())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last int64
	for i := range 200 {
		resp, err := cli.Put(ctx, fmt.Sprintf("/wipe/k%03d", i), "v")
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		last = resp.Header.Revision
	}
	f := (l + 1) % len(c.Nodes)
	c.Kill(f)
	c.Wipe(f)
	// Writes while it is gone, so it cannot simply be at the end already.
	for i := 200; i < 300; i++ {
		resp, err := cli.Put(ctx, fmt.Sprintf("/wipe/k%03d", i), "v")
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		last = resp.Header.Revision
	}
	if err := c.Restart(f); err != nil {
		t.Fatal(err)
	}
	fcli := etcdClient(t, []string{c.Nodes[f].EtcdAddr})
	for {
		// A serializable read answers from the wiped member's own state.
		resp, err := fcli.Get(ctx, "/wipe/", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
		if err == nil && resp.Count == 300 && resp.Header.Revision >= last {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("wiped member did not catch up: %v %+v", err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And it takes part again: a write through it is acknowledged. Its
	// state can be caught up a moment before it has finished joining the
	// leader, when it still answers "no leader", which a client retries.
	for {
		_, err := fcli.Put(ctx, "/wipe/after", "v")
		if err == nil {
			break
		}
		if !errors.Is(err, rpctypes.ErrNoLeader) || ctx.Err() != nil {
			t.Fatalf("write through the rejoined member: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if log := tail(c.Nodes[f].LogPath, 1000); !strings.Contains(log, "installed snapshot") {
		t.Errorf("the wiped member caught up without a snapshot; its log:\n%s", tail(c.Nodes[f].LogPath, 30))
	}
}

// TestClusterFailover measures how long after the leader is killed the
// next write is acknowledged, over a few rounds, and checks that writes
// resume at all. The figures are logged, not asserted.
func TestClusterFailover(t *testing.T) {
	c := Start(t, Options{Binary: binary, Nodes: 3})
	rounds := 3
	if chaosDuration(t) > 0 {
		rounds = 10
	}
	var took []time.Duration
	for range rounds {
		l := mustLeader(t, c)
		var clients []*clientv3.Client
		for i, n := range c.Nodes {
			if i != l {
				clients = append(clients, etcdClient(t, []string{n.EtcdAddr}))
			}
		}
		// Warm the connections, so dialing is not measured; the followers
		// may still be joining the leader.
		for _, cli := range clients {
			firstWrite(t, []*clientv3.Client{cli}, time.Now())
		}
		killed := time.Now()
		c.Kill(l)
		d := firstWrite(t, clients, killed)
		took = append(took, d)
		t.Logf("leader %d killed: next write acknowledged after %v", c.Nodes[l].ID, d)
		if err := c.Restart(l); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(took)
	t.Logf("failover (leader SIGKILL -> next acknowledged write) over %d rounds: median %v, max %v", len(took), took[len(took)/2], took[len(took)-1])
}

// firstWrite races writes through every client until one is acknowledged
// and returns how long after since that was.
func firstWrite(t *testing.T, clients []*clientv3.Client, since time.Time) time.Duration {
	t.Helper()
	deadline := since.Add(30 * time.Second)
	for time.Now().Before(deadline) {
		done := make(chan time.Time, len(clients))
		for _, cli := range clients {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
				defer cancel()
				if _, err := cli.Put(ctx, "/failover", "x"); err == nil {
					done <- time.Now()
					return
				}
				done <- time.Time{}
			}()
		}
		var first time.Time
		for range clients {
			if at := <-done; !at.IsZero() && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
		if !first.IsZero() {
			return first.Sub(since)
		}
	}
	t.Fatal("no write acknowledged within 30s of killing the leader")
	return 0
}
