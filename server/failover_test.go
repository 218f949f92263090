package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zab"
)

// memEnsemble is an in-process ensemble on a zab.MemNetwork whose members
// count leases down by one shared fake clock.
type memEnsemble struct {
	t       *testing.T
	net     *zab.MemNetwork
	clock   *fakeClock
	members map[uint64]*Member
}

func startMemEnsemble(t *testing.T, voters, observers int) *memEnsemble {
	t.Helper()
	// The network is fault-free: its seed picks nothing.
	e := &memEnsemble{t: t, net: zab.NewMemNetwork(1), clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, members: map[uint64]*Member{}}
	peers, obs := map[uint64]string{}, map[uint64]string{}
	for id := uint64(1); id <= uint64(voters+observers); id++ {
		if id <= uint64(voters) {
			peers[id] = fmt.Sprintf("mem-%d", id)
		} else {
			obs[id] = fmt.Sprintf("mem-%d", id)
		}
	}
	for id := uint64(1); id <= uint64(voters+observers); id++ {
		m, err := OpenMember(MemberConfig{
			DataDir: t.TempDir(), ID: id, Clock: e.clock.Now, Peers: peers, Observers: obs,
			Transport: e.net.Endpoint(id), ElectionTimeout: 200 * time.Millisecond,
			HeartbeatInterval: 20 * time.Millisecond, LeaseCheckInterval: 5 * time.Millisecond,
			ReaperInterval: 10 * time.Millisecond, publishEvery: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("open member %d: %v", id, err)
		}
		e.members[id] = m
	}
	t.Cleanup(func() {
		for _, m := range e.members {
			m.Close()
		}
		e.net.Wait()
	})
	return e
}

// leader waits until one of ids leads (its lessor running) and every one
// of ids takes writes, and returns it.
func (e *memEnsemble) leader(ids ...uint64) uint64 {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var l uint64
		for _, id := range ids {
			if e.members[id].roles.leading.Load() {
				l = id
			}
		}
		ok := l != 0
		for _, id := range ids {
			if !ok {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := e.members[id].Propose(ctx, putOp("/ready", fmt.Sprint(id), 0))
			cancel()
			ok = err == nil
		}
		if ok {
			return l
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no leader among %v", ids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *memEnsemble) others(but uint64) []uint64 {
	var out []uint64
	for id := range uint64(len(e.members)) {
		if id+1 != but {
			out = append(out, id+1)
		}
	}
	return out
}

// TestLeaderChangeGivesEveryLeaseAFullTTL: a lease kept alive through a
// follower and an observer, whose countdown on the old leader ran out while
// the ensemble elected another, lives on: the new leader gives it a fresh
// full TTL before any expiry check, keep-alives during the election get a
// retriable error and never "not found", and the revocation the old
// leader's stale countdown decided never commits, not even after it
// rejoins.
func TestLeaderChangeGivesEveryLeaseAFullTTL(t *testing.T) {
	e := startMemEnsemble(t, 3, 1)
	ctx := context.Background()
	old := e.leader(1, 2, 3, 4)
	follower, observer := e.others(old)[0], uint64(4)
	if follower == observer {
		t.Fatal("test setup: the observer is not a follower")
	}
	const ttl = 10
	id := e.members[follower].Leases().NewID()
	if res, err := e.members[follower].Propose(ctx, &core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: ttl}}); err != nil || res.Err != nil {
		t.Fatalf("grant through a follower: %v %v", err, res)
	}
	if res, err := e.members[observer].Propose(ctx, putOp("/eph", "x", id)); err != nil || res.Err != nil {
		t.Fatalf("attach a key through the observer: %v %v", err, res)
	}
	for _, via := range []uint64{follower, observer} {
		if got, err := e.members[via].Leases().KeepAlive(ctx, id); err != nil || got != ttl {
			t.Fatalf("keepalive through %d: %d %v", via, got, err)
		}
	}

	oldEpoch := e.members[old].zab.Status().Epoch
	// The leader is cut off; its countdown runs out while the rest elect.
	e.clock.Advance(8 * time.Second)
	e.net.Partition([]uint64{old})
	kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := e.members[observer].Leases().KeepAlive(kctx, id)
	cancel()
	if core.CodeOf(err) == core.CodeLeaseNotFound {
		t.Fatalf("keepalive during the election answered %v, want a retriable error or a renewal", err)
	}
	t.Logf("keepalive through the observer during the election: %v", err)
	e.clock.Advance(5 * time.Second) // 13s after the last keep-alive the old leader saw
	rest := e.others(old)
	now := e.leader(rest...)
	if now == old {
		t.Fatal("the cut-off member still leads")
	}
	// The new leader counts a full TTL from its takeover.
	if ms, ok := e.members[now].Leases().Remaining(id); !ok || ms != ttl*1000 {
		t.Fatalf("on the new leader %d the lease has %dms left (found %v), want a full %ds", now, ms, ok, ttl)
	}
	e.clock.Advance((ttl - 1) * time.Second)
	if ms, ok := e.members[now].Leases().Remaining(id); !ok || ms != 1000 {
		t.Fatalf("new leader: %dms left (found %v), want 1000", ms, ok)
	}
	if got, err := e.members[observer].Leases().KeepAlive(ctx, id); err != nil || got != ttl {
		t.Fatalf("keepalive through the observer after the election: %d %v", got, err)
	}

	// The old leader rejoins; whatever its stale countdown decided must
	// not commit.
	e.net.Heal()
	e.leader(1, 2, 3, 4)
	for mid, m := range e.members {
		v, err := m.Read(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := v.Lease(id)
		n, _ := v.Node([]byte("/eph"))
		v.Close()
		if err != nil || l == nil || n == nil {
			t.Fatalf("member %d after the failover: lease %v (%v), key %v", mid, l, err, n)
		}
	}
	if got, err := e.members[old].Leases().KeepAlive(ctx, id); err != nil || got != ttl {
		t.Fatalf("keepalive through the former leader: %d %v", got, err)
	}
	// An expiry its lessor decided in its old leadership is refused, not
	// forwarded to the new leader.
	res, err := e.members[old].proposeAsLeader(ctx, oldEpoch, &core.Op{LeaseRevoke: &core.LeaseRevoke{ID: id}})
	if !errors.Is(err, core.ErrLeaderChanged) {
		t.Fatalf("the former leader's expiry: %v %v, want ErrLeaderChanged", res, err)
	}
	if _, ok := e.members[now].Leases().Remaining(id); !ok {
		t.Fatal("the lease is gone")
	}
}

// TestKeepAliveDuringARevocationWaitsForIt: a keep-alive that reaches the
// lessor while the lease's expiry is being proposed is answered "not
// found" only if the revocation commits; if it does not (the leader lost
// its leadership), the lease is renewed.
func TestKeepAliveDuringARevocationWaitsForIt(t *testing.T) {
	for _, commits := range []bool{false, true} {
		t.Run(fmt.Sprintf("commits=%v", commits), func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			release := make(chan struct{})
			var ls *lessor
			ls = newLessor(clock.Now, 2, func(ctx context.Context, epoch uint32, op *core.Op) (*core.Result, error) {
				<-release
				if !commits {
					return nil, fmt.Errorf("propose as leader: %w", core.ErrLeaderChanged)
				}
				e := core.Entry{Index: 2, Op: *op}
				res := &core.Result{}
				ls.observe([]core.Entry{e}, []*core.Result{res})
				return res, nil
			}, slog.New(slog.DiscardHandler))
			const id = 7
			ls.observe([]core.Entry{{Index: 1, Op: core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: 5}}}}, []*core.Result{{}})
			clock.Advance(6 * time.Second)
			expired := ls.expired()
			if len(expired) != 1 || expired[id] == nil {
				t.Fatalf("expired = %v", expired)
			}
			// While the revocation is in flight the lease is neither renewed
			// nor reported gone.
			if ttl, wait, err := ls.renew(id); wait == nil {
				t.Fatalf("keepalive during the revocation answered %d, %v without waiting", ttl, err)
			}
			expiring := make(chan struct{})
			go func() {
				defer close(expiring)
				ls.expire(context.Background(), 1, id, expired[id])
			}()
			close(release)
			<-expiring
			_, err := ls.KeepAlive(context.Background(), id)
			switch {
			case commits && core.CodeOf(err) != core.CodeLeaseNotFound:
				t.Fatalf("keepalive after the revocation committed: %v, want not found", err)
			case !commits && err != nil:
				t.Fatalf("keepalive after the revocation failed: %v, want a renewal", err)
			}
			if !commits {
				if ms, ok := ls.Remaining(id); !ok || ms != 5000 {
					t.Fatalf("renewed lease has %dms (found %v)", ms, ok)
				}
			}
		})
	}
}
