package server

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/januskv/janus/core"
)

func zkCreate(path string, mode core.Mode, ttl int64) core.TxnOp {
	return core.TxnOp{Kind: core.OpCreate, Key: []byte(path), Create: &core.CreateOptions{Mode: mode, TTL: ttl}}
}

func zkDelete(path string) core.TxnOp {
	return core.TxnOp{Kind: core.OpDelete, Key: []byte(path), ExpectedVersion: -1}
}

// proposeZK commits ops as one ZooKeeper multi through m.
func proposeZK(t *testing.T, m *Member, ops ...core.TxnOp) {
	t.Helper()
	res, err := m.Propose(context.Background(), &core.Op{Txn: &core.Txn{Success: ops}, Origin: core.OriginZooKeeper})
	if err != nil || res.Err != nil {
		t.Fatalf("zk ops through member %d: %v %v", m.cfg.ID, err, res)
	}
}

// waitGone waits until path is gone on every member of ids.
func (e *memEnsemble) waitGone(path string, ids ...uint64) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			v, err := e.members[id].Read(context.Background(), 0)
			if err != nil {
				e.t.Fatalf("read member %d: %v", id, err)
			}
			n, err := v.Node([]byte(path))
			v.Close()
			if err != nil {
				e.t.Fatalf("read %s on member %d: %v", path, id, err)
			}
			if n == nil {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("%s was never reaped on member %d", path, id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// reaped returns, for each member, how many deletes its reaper proposed
// in each epoch, and fails the test if two members proposed in one epoch:
// an epoch has one leader, and only the leader reaps. Leader changes the
// test did not cause do not upset it.
func (e *memEnsemble) reaped() map[uint64]map[uint32]uint64 {
	e.t.Helper()
	out := map[uint64]map[uint32]uint64{}
	by := map[uint32]uint64{} // epoch → the member that proposed in it
	for id, m := range e.members {
		m.reaper.mu.Lock()
		out[id] = maps.Clone(m.reaper.proposed)
		m.reaper.mu.Unlock()
		for epoch := range out[id] {
			if other, ok := by[epoch]; ok {
				e.t.Errorf("members %d and %d both proposed reaper deletes in epoch %d", other, id, epoch)
			}
			by[epoch] = id
		}
	}
	return out
}

// TestOnlyTheLeaderReaps: the reaper has the lessor's owner. Containers
// and TTL nodes made through a follower are reaped by the leader alone (no
// two members propose deletes in one epoch), and after a leader change the
// new leader reaps what became due under it, the old one nothing.
func TestOnlyTheLeaderReaps(t *testing.T) {
	e := startMemEnsemble(t, 3, 0)
	old := e.leader(1, 2, 3)
	via := e.others(old)[0]
	proposeZK(t, e.members[via],
		zkCreate("/c1", core.ModeContainer, 0), zkCreate("/c1/x", core.ModePersistent, 0),
		zkCreate("/c2", core.ModeContainer, 0), zkCreate("/c2/x", core.ModePersistent, 0),
		zkCreate("/ttl", core.ModeTTL, 1000))
	// Emptying /c1 makes it due; /ttl is due once a TTL has passed.
	proposeZK(t, e.members[via], zkDelete("/c1/x"))
	e.clock.Advance(2 * time.Second)
	e.waitGone("/c1", 1, 2, 3)
	e.waitGone("/ttl", 1, 2, 3)
	before := e.reaped()
	t.Logf("reaper deletes by member and epoch, leader %d: %v", old, before)
	total := uint64(0)
	for _, byEpoch := range before {
		for _, n := range byEpoch {
			total += n
		}
	}
	if total < 2 {
		t.Errorf("%d reaper deletes proposed, want at least 2", total)
	}

	// The leader is cut off and another is elected: it reaps /c2 once
	// it is emptied, which the old one never sees.
	e.net.Partition([]uint64{old})
	rest := e.others(old)
	now := e.leader(rest...)
	if now == old {
		t.Fatal("the cut-off member still leads")
	}
	epoch := e.members[now].zab.Status().Epoch
	proposeZK(t, e.members[now], zkDelete("/c2/x"))
	e.waitGone("/c2", rest...)
	after := e.reaped()
	t.Logf("reaper deletes by member and epoch after the change, leader %d in epoch %d: %v", now, epoch, after)
	reapedLater := false
	for _, id := range rest {
		for ep, n := range after[id] {
			reapedLater = reapedLater || ep >= epoch && n > 0
		}
	}
	if !reapedLater {
		t.Errorf("no member proposed a reaper delete in epoch %d or later", epoch)
	}
	if !maps.Equal(after[old], before[old]) {
		t.Errorf("the old leader proposed reaper deletes once cut off: %v, then %v", before[old], after[old])
	}
	e.net.Heal()
	e.waitGone("/c2", old)
}

// TestReapSetFollowsBatches: the candidates are exactly the containers and
// TTL nodes the applied batches leave.
func TestReapSetFollowsBatches(t *testing.T) {
	put := func(path string, mode core.Mode, implicit bool) core.Event {
		return core.Event{Type: core.EventPut, Node: &core.Node{Key: []byte(path), Mode: mode}, Implicit: implicit}
	}
	del := func(path string) core.Event {
		return core.Event{Type: core.EventDelete, Node: &core.Node{Key: []byte(path)}}
	}
	var r reapSet
	steps := []struct {
		events []core.Event
		want   []string
	}{
		{[]core.Event{put("/c", core.ModeContainer, false), put("/t", core.ModeTTL, false), put("/p", core.ModePersistent, false)}, []string{"/c", "/t"}},
		{[]core.Event{del("/c")}, []string{"/t"}},
		// An etcd delete of a TTL node with children leaves an implicit
		// parent there.
		{[]core.Event{put("/t", core.ModePersistent, true)}, []string{}},
		{[]core.Event{put("/c", core.ModeContainer, false), {Type: core.EventPut}}, []string{"/c"}},
	}
	for i, s := range steps {
		r.observe([]*core.Batch{{Events: s.events}})
		if got := r.paths(); !slices.Equal(got, s.want) {
			t.Fatalf("step %d: candidates %q, want %q", i, got, s.want)
		}
	}
}
