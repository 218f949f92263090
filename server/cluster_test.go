package server

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/testlog"
)

// TestChangeClusterFromAFollower adds and removes observers (a voter that
// never starts would leave the ensemble no slack: the differential test of
// the etcd face adds one) through a follower, which forwards each change to the leader: every answer is the
// committed configuration, which the follower itself already shows, with
// the metadata the change carried; refusals come back as core's errors.
func TestChangeClusterFromAFollower(t *testing.T) {
	e := startMemEnsemble(t, 3, 0)
	leader := e.leader(1, 2, 3)
	testChangeCluster(t, e.members[e.others(leader)[0]])
}

// TestChangeClusterOnTheLeader makes the same changes on the leader.
func TestChangeClusterOnTheLeader(t *testing.T) {
	e := startMemEnsemble(t, 3, 0)
	testChangeCluster(t, e.members[e.leader(1, 2, 3)])
}

// TestChangeClusterOnASingleMember: a single member started with its own
// peer address (--peers naming only itself) is the one voter of its
// ensemble and takes the same changes; one started without peers has no
// address a peer could reach, and refuses.
func TestChangeClusterOnASingleMember(t *testing.T) {
	e := startMemEnsemble(t, 1, 0)
	testChangeCluster(t, e.members[e.leader(1)])

	lone, err := OpenMember(MemberConfig{DataDir: t.TempDir(), Logger: testlog.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer lone.Close()
	ctx := context.Background()
	cur, err := lone.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	added := core.ClusterMember{ID: cur.NextMemberID(), PeerURL: "http://new:2380", IsObserver: true}
	if _, err := lone.ChangeCluster(ctx, cur.Version, append(cur.Members, added)); !errors.Is(err, core.ErrNotReplicated) {
		t.Fatalf("change on a member started without peers: %v, want ErrNotReplicated", err)
	}
}

func testChangeCluster(t *testing.T, via *Member) {
	ctx := context.Background()
	for round := range 6 {
		cur, err := via.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := cur.NextMemberID()
		added := core.ClusterMember{ID: id, Name: "new", PeerURL: "http://mem-new:2380", EtcdURL: "http://new:2379", ZKAddr: "new:2181", ZKElectionAddr: "new:3888", IsObserver: true}
		next, err := via.ChangeCluster(ctx, cur.Version, append(slices.Clone(cur.Members), added))
		if err != nil {
			t.Fatalf("round %d: add %d through a follower: %v", round, id, err)
		}
		got, ok := next.Member(id)
		if !ok || next.Version == cur.Version {
			t.Fatalf("round %d: answer %+v lacks member %d", round, next, id)
		}
		added.IsLeader = false
		if got != added {
			t.Errorf("round %d: added member reads back as %+v, want %+v", round, got, added)
		}
		shown, err := via.Cluster(ctx)
		if err != nil || shown.Version != next.Version {
			t.Fatalf("round %d: the follower shows version %x (%v), the change committed %x", round, shown.Version, err, next.Version)
		}
		// The entry's time, the leader's clock when it accepted the
		// change, is what /zookeeper/config shows as mtime.
		if next.Time == 0 || shown.Time != next.Time || next.Time < cur.Time {
			t.Errorf("round %d: configuration time %d, shown %d, before %d", round, next.Time, shown.Time, cur.Time)
		}
		if st := via.Status(); len(st.Members) != len(cur.Members)+1 {
			t.Errorf("round %d: Status lists %d members, want %d", round, len(st.Members), len(cur.Members)+1)
		}
		if _, err := via.ChangeCluster(ctx, cur.Version, cur.Members); !errors.Is(err, core.ErrStaleCluster) {
			t.Errorf("round %d: change against a replaced version: %v, want ErrStaleCluster", round, err)
		}
		rest := slices.DeleteFunc(slices.Clone(next.Members), func(m core.ClusterMember) bool { return m.ID == id })
		back, err := via.ChangeCluster(ctx, next.Version, rest)
		if err != nil {
			t.Fatalf("round %d: remove %d through a follower: %v", round, id, err)
		}
		if _, ok := back.Member(id); ok || back.LastID < id || back.NextMemberID() <= id {
			t.Fatalf("round %d: after removing %d: %+v", round, id, back)
		}
	}
}

// TestChangeClusterRefusesWithoutAConnectedQuorum: a change whose voters
// the leader is not connected to a quorum of is refused before it is
// proposed (etcd's strict reconfiguration check), here adding two voters
// that never started to three.
func TestChangeClusterRefusesWithoutAConnectedQuorum(t *testing.T) {
	e := startMemEnsemble(t, 3, 0)
	ctx := context.Background()
	leader := e.leader(1, 2, 3)
	via := e.members[e.others(leader)[0]]
	cur, err := via.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := cur.NextMemberID()
	more := append(slices.Clone(cur.Members),
		core.ClusterMember{ID: id, PeerURL: "http://mem-a:1"}, core.ClusterMember{ID: id + 1, PeerURL: "http://mem-b:1"})
	// 3 of 5 voters connected is a quorum: a third would not be.
	more = append(more, core.ClusterMember{ID: id + 2, PeerURL: "http://mem-c:1"})
	if _, err := via.ChangeCluster(ctx, cur.Version, more); !errors.Is(err, core.ErrUnhealthy) {
		t.Fatalf("adding three unstarted voters to three: %v, want ErrUnhealthy", err)
	}
	if now, _ := via.Cluster(ctx); now.Version != cur.Version {
		t.Fatalf("a refused change committed: version %x", now.Version)
	}
}

// TestMoveLeaderFromAFollower moves the leadership to another voter
// through a follower, and refuses a target that does not vote.
func TestMoveLeaderFromAFollower(t *testing.T) {
	e := startMemEnsemble(t, 3, 1)
	ctx := context.Background()
	leader := e.leader(1, 2, 3, 4)
	others := e.others(leader)
	via, target := e.members[others[0]], others[1]
	if target == 4 {
		via, target = e.members[4], others[0]
	}
	if err := via.MoveLeader(ctx, 4); !errors.Is(err, core.ErrNotVoter) {
		t.Fatalf("move leader to the observer: %v, want ErrNotVoter", err)
	}
	if err := via.MoveLeader(ctx, target); err != nil {
		t.Fatalf("move leader to %d through a follower: %v", target, err)
	}
	if got := e.leader(1, 2, 3, 4); got != target {
		t.Fatalf("leader is %d after moving it to %d", got, target)
	}
}

// TestChangeClusterWithAVoterDown: with one of three voters stopped,
// adding a voter and removing a live one are refused (the rest would not
// make a connected quorum, and a change that cannot commit would stall
// every write), and removing the stopped one commits.
func TestChangeClusterWithAVoterDown(t *testing.T) {
	e := startMemEnsemble(t, 3, 0)
	ctx := context.Background()
	e.leader(1, 2, 3)
	e.members[1].Close()
	delete(e.members, 1)
	leader := e.leader(2, 3)
	via := e.members[5-leader]
	cur, err := via.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitUnheard(t, e.members[leader], 1)
	add := append(slices.Clone(cur.Members), core.ClusterMember{ID: cur.NextMemberID(), PeerURL: "http://mem-new:1"})
	if _, err := via.ChangeCluster(ctx, cur.Version, add); !errors.Is(err, core.ErrUnhealthy) {
		t.Fatalf("adding a voter with one of three down: %v, want ErrUnhealthy", err)
	}
	live := slices.DeleteFunc(slices.Clone(cur.Members), func(m core.ClusterMember) bool { return m.ID == via.cfg.ID })
	if _, err := via.ChangeCluster(ctx, cur.Version, live); !errors.Is(err, core.ErrUnhealthy) {
		t.Fatalf("removing a live voter with one of three down: %v, want ErrUnhealthy", err)
	}
	rest := slices.DeleteFunc(slices.Clone(cur.Members), func(m core.ClusterMember) bool { return m.ID == 1 })
	if _, err := via.ChangeCluster(ctx, cur.Version, rest); err != nil {
		t.Fatalf("removing the voter that is down: %v", err)
	}
	e.leader(2, 3)
}

// waitUnheard waits until leader no longer counts member id as connected:
// until then it could not tell a stopped member from a slow one. The
// caller has stopped id. The leader's view (PeerAcked) lists the peers
// heard in its last three heartbeat intervals, refreshed every interval,
// and is nil until the first refresh; but a view lacking id is not enough
// either: one refreshed before id finished synchronizing lacks it too, and
// the next may list it again. So the view must lack id through twice the
// span a heard peer stays in it, after which every peer heard before the
// call has aged out of it.
func waitUnheard(t *testing.T, leader *Member, id uint64) {
	t.Helper()
	quiet := 2 * (3 + 1) * leader.heartbeat()
	deadline := time.Now().Add(30 * time.Second)
	var unheardSince time.Time
	for {
		acked := leader.zab.Status().PeerAcked
		_, heard := acked[id]
		switch {
		case acked == nil || heard:
			unheardSince = time.Time{}
		case unheardSince.IsZero():
			unheardSince = time.Now()
		case time.Since(unheardSince) >= quiet:
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader still counts member %d as connected", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAMemberPublishesItsName: a configuration that lists a running
// member without a name (as etcd's MemberAdd leaves one until it starts)
// gets the member's own name and client addresses from the member itself.
func TestAMemberPublishesItsName(t *testing.T) {
	e := startMemEnsemble(t, 3, 1)
	ctx := context.Background()
	e.leader(1, 2, 3, 4)
	via := e.members[1]
	cur, err := via.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nameless := slices.Clone(cur.Members)
	for i := range nameless {
		if nameless[i].ID == 4 {
			nameless[i].Name, nameless[i].EtcdURL = "", ""
		}
	}
	next, err := via.ChangeCluster(ctx, cur.Version, nameless)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := next.Member(4); m.Name != "" {
		t.Fatalf("member 4 named %q right after the change", m.Name)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := via.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := c.Member(4); m.Name == e.members[4].cfg.Name {
			if c.Version <= next.Version {
				t.Fatalf("member 4 named in version %x, not after %x", c.Version, next.Version)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member 4 never published its name: %+v", c.Members)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
