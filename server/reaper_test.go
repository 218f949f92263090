package server

import (
	"context"
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

// reaped returns how many deletes each member's reaper has proposed.
func (e *memEnsemble) reaped() map[uint64]uint64 {
	out := map[uint64]uint64{}
	for id, m := range e.members {
		out[id] = m.reaper.proposed.Load()
	}
	return out
}

// TestOnlyTheLeaderReaps: the reaper has the lessor's owner. Containers
// and TTL nodes made through a follower are reaped by the leader alone (no
// other member proposes a delete), and after a leader change the new
// leader reaps what became due under it, the old one nothing.
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
	counts := e.reaped()
	t.Logf("deletes proposed by member, leader %d: %v", old, counts)
	for id, n := range counts {
		if id != old && n != 0 {
			t.Errorf("follower %d proposed %d reaper deletes", id, n)
		}
	}
	if counts[old] < 2 {
		t.Errorf("the leader proposed %d reaper deletes, want at least 2", counts[old])
	}

	// The leader is cut off and another is elected: it reaps /c2 once
	// it is emptied, which the old one never sees.
	e.net.Partition([]uint64{old})
	rest := e.others(old)
	now := e.leader(rest...)
	if now == old {
		t.Fatal("the cut-off member still leads")
	}
	proposeZK(t, e.members[now], zkDelete("/c2/x"))
	e.waitGone("/c2", rest...)
	after := e.reaped()
	t.Logf("deletes proposed by member after the change, leader %d: %v", now, after)
	for _, id := range rest {
		switch {
		case id == now && after[id] == 0:
			t.Errorf("the new leader %d proposed no reaper delete", id)
		case id != now && after[id] != 0:
			t.Errorf("follower %d proposed %d reaper deletes", id, after[id])
		}
	}
	if after[old] != counts[old] {
		t.Errorf("the old leader proposed %d more reaper deletes once cut off", after[old]-counts[old])
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
