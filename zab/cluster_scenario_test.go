package zab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func (c *cluster) running(except ...uint64) []uint64 {
	var out []uint64
	for _, id := range c.ids() {
		if c.nodes[id].m != nil && !slices.Contains(except, id) {
			out = append(out, id)
		}
	}
	return out
}

func (c *cluster) followerOf(leader uint64) uint64 {
	for _, id := range c.ids() {
		if id != leader && c.peers[id] != "" && c.nodes[id].m != nil {
			return id
		}
	}
	c.t.Fatal("no follower")
	return 0
}

// Killing the leader elects another; nothing acknowledged is lost; the old
// leader rejoins and catches up by DIFF.
func TestLeaderCrashLosesNothingAndOldLeaderRejoins(t *testing.T) {
	c := newCluster(t, 3, 0)
	c.startAll()
	old := c.leader()
	var acked []string
	for i := range 10 {
		acked = append(acked, fmt.Sprintf("a%d", i))
		c.propose(c.ids()[i%3], acked[i])
	}
	oldEpoch := c.nodes[old].m.Status().Epoch
	c.stop(old)
	nl := c.leader()
	if nl == old {
		t.Fatal("stopped member still leads")
	}
	if ep := c.nodes[nl].m.Status().Epoch; ep <= oldEpoch {
		t.Fatalf("new leader's epoch %d not above %d", ep, oldEpoch)
	}
	for i := range 10 {
		acked = append(acked, fmt.Sprintf("b%d", i))
		c.propose(c.running()[i%2], acked[len(acked)-1])
	}
	c.start(old)
	c.leader()
	got := c.converge(uint64(len(acked)))
	if !slices.Equal(got, acked) {
		t.Fatalf("history %q, want %q", got, acked)
	}
}

// A leader cut off from the others keeps an uncommitted tail; when it
// comes back after the others moved on, that tail is truncated.
func TestDivergentUncommittedTailIsTruncated(t *testing.T) {
	c := newCluster(t, 3, 0)
	c.startAll()
	l := c.leader()
	c.propose(l, "common")
	c.converge(1)
	others := c.running(l)
	c.net.Partition([]uint64{l}, others)
	// The isolated leader logs these but can never commit them.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if _, err := c.nodes[l].m.Propose(ctx, []byte(fmt.Sprintf("lost%d", i))); err == nil {
				t.Errorf("an isolated leader committed a proposal")
			}
		})
	}
	eventually(t, "the isolated leader to log its proposals", func() bool { return c.nodes[l].m.Status().LastIndex >= 4 })
	wg.Wait()
	c.stop(l)
	c.net.Heal()
	nl := c.leader(others...)
	for i := range 5 {
		c.propose(nl, fmt.Sprintf("new%d", i))
	}
	c.start(l)
	c.leader()
	got := c.converge(6)
	if want := []string{"common", "new0", "new1", "new2", "new3", "new4"}; !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	for _, p := range c.nodes[l].sm.history() {
		if strings.HasPrefix(p, "lost") {
			t.Fatalf("the uncommitted entry %q was applied", p)
		}
	}
}

// A member that lost its disk rejoins by snapshot when the others have
// trimmed their logs.
func TestWipedMemberRejoinsBySnapshot(t *testing.T) {
	c := newCluster(t, 3, 0)
	c.startAll()
	l := c.leader()
	var want []string
	for i := range 60 {
		want = append(want, fmt.Sprintf("%s-%d", strings.Repeat("x", 100), i))
		c.propose(l, want[i])
	}
	c.converge(60)
	for _, id := range c.ids() {
		if _, err := c.nodes[id].m.Trim(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if first := c.nodes[l].m.Status().FirstIndex; first <= 1 {
		t.Fatalf("leader's log was not trimmed (first index %d)", first)
	}
	f := c.followerOf(l)
	c.stop(f)
	c.wipe(f)
	c.start(f)
	c.leader()
	for i := 60; i < 65; i++ {
		want = append(want, fmt.Sprintf("after-%d", i))
		c.propose(f, want[i])
	}
	if got := c.converge(65); !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	if len(c.nodes[f].sm.base) == 0 {
		t.Fatal("the wiped member did not restore a snapshot")
	}
	// And it restarts from the snapshot and its log.
	c.stop(f)
	c.start(f)
	c.propose(f, "last")
	c.converge(66)
}

// The minority side of a partition cannot commit; the majority elects a
// leader and goes on; after healing everyone agrees.
func TestMinorityPartitionCannotCommit(t *testing.T) {
	c := newCluster(t, 5, 0)
	c.startAll()
	l := c.leader()
	c.propose(l, "before")
	minority := []uint64{l, c.followerOf(l)}
	var majority []uint64
	for _, id := range c.ids() {
		if !slices.Contains(minority, id) {
			majority = append(majority, id)
		}
	}
	c.net.Partition(minority, majority)
	for _, id := range minority {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := c.nodes[id].m.Propose(ctx, []byte(fmt.Sprintf("minority-%d", id)))
		cancel()
		if err == nil {
			t.Fatalf("member %d committed on the minority side", id)
		}
	}
	eventually(t, "the old leader to step down", func() bool { return c.nodes[l].m.Status().Role == RoleLooking })
	if _, err := c.nodes[l].m.ReadIndex(context.Background()); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("ReadIndex on a member without a leader: %v", err)
	}
	nl := c.leader(majority...)
	for i := range 5 {
		c.propose(majority[i%3], fmt.Sprintf("majority-%d", i))
	}
	c.net.Heal()
	// The healed minority joins the established leader (its epoch is
	// behind) rather than forcing a new election.
	if after := c.leader(); after != nl {
		t.Errorf("after healing, member %d leads; the majority's leader was %d", after, nl)
	}
	got := c.converge(6)
	for _, p := range got {
		if strings.HasPrefix(p, "minority") {
			t.Fatalf("history %q holds a minority write", got)
		}
	}
}

// With lost, duplicated and delayed (so reordered) messages, every
// acknowledged write is applied exactly once, in the same order everywhere.
func TestDuplicateAndReorderedMessagesChangeNothing(t *testing.T) {
	c := newCluster(t, 3, 1)
	c.startAll()
	c.leader()
	c.net.SetFaults(Faults{Drop: 0.05, Duplicate: 0.3, MaxDelay: 3 * time.Millisecond})
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for _, id := range c.ids() {
		wg.Go(func() {
			for i := range 15 {
				deadline := time.Now().Add(20 * time.Second)
				for attempt := 0; ; attempt++ {
					data := fmt.Sprintf("m%d-%d-try%d", id, i, attempt)
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_, err := c.nodes[id].m.Propose(ctx, []byte(data))
					cancel()
					if err == nil {
						mu.Lock()
						acked = append(acked, data)
						mu.Unlock()
						break
					}
					if !retryable(err) || time.Now().After(deadline) {
						t.Errorf("propose on %d: %v", id, err)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	c.net.SetFaults(Faults{})
	// A final write from the leader makes every earlier one committed.
	last := c.propose(c.leader(), "final")
	got := c.converge(last.Index)
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Fatalf("%q applied twice", p)
		}
		seen[p] = true
	}
	for _, p := range acked {
		if !seen[p] {
			t.Fatalf("acknowledged %q is missing from %q", p, got)
		}
	}
}

// Persisted epochs never go back, across restarts of every member.
func TestEpochsNeverGoBackAcrossRestarts(t *testing.T) {
	c := newCluster(t, 3, 0)
	c.startAll()
	last := map[uint64]Epochs{}
	for round := range 4 {
		l := c.leader()
		c.propose(l, fmt.Sprintf("r%d", round))
		victim := c.ids()[round%3]
		if round%2 == 0 {
			victim = l
		}
		c.stop(victim)
		for _, id := range c.ids() {
			ep, err := readEpochs(c.nodes[id].dir)
			if err != nil {
				t.Fatal(err)
			}
			if ep.Accepted < ep.Current || ep.Accepted < last[id].Accepted || ep.Current < last[id].Current {
				t.Fatalf("member %d epochs %+v after %+v", id, ep, last[id])
			}
			last[id] = ep
		}
		c.start(victim)
	}
	c.leader()
	c.converge(4)
}

func TestReadIndexAndCallLeader(t *testing.T) {
	c := newCluster(t, 3, 1)
	c.startAll()
	l := c.leader()
	for _, id := range c.ids() {
		c.nodes[id].m.SetLeaderHandler(func(ctx context.Context, p []byte) ([]byte, error) {
			if string(p) == "fail" {
				return nil, errors.New("handler says no")
			}
			return []byte(fmt.Sprintf("%d:%s", id, p)), nil
		})
	}
	w := c.propose(l, "x")
	for _, id := range c.ids() {
		m := c.nodes[id].m
		idx, err := m.ReadIndex(context.Background())
		if err != nil || idx < w.Index {
			t.Fatalf("ReadIndex on %d = %d, %v; want >= %d", id, idx, err, w.Index)
		}
		if err := m.WaitApplied(context.Background(), idx); err != nil {
			t.Fatal(err)
		}
		out, err := m.CallLeader(context.Background(), []byte("ping"))
		if want := fmt.Sprintf("%d:ping", l); err != nil || string(out) != want {
			t.Fatalf("CallLeader on %d = %q, %v; want %q", id, out, err, want)
		}
		if _, err := m.CallLeader(context.Background(), []byte("fail")); err == nil || !strings.Contains(err.Error(), "handler says no") {
			t.Fatalf("failing CallLeader on %d: %v", id, err)
		}
	}
	var roles []RoleChange
	for len(roles) == 0 || roles[len(roles)-1].Role != RoleLeader {
		roles = append(roles, <-c.nodes[l].m.RoleChanges())
	}
	if rc := roles[len(roles)-1]; rc.LeaderID != l || rc.Epoch == 0 {
		t.Fatalf("leader's last role change %+v", rc)
	}
}
