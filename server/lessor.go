package server

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/store"
)

// lessor keeps each lease's countdown on the member that owns leases (the
// leader) and turns expiry into a proposed LeaseRevoke, so expiry reaches
// every replica through the log rather than through anyone's clock. The
// countdowns are not replicated: a member that starts owning leases gives
// every lease a fresh full TTL (refresh, before its first expiry check), so
// a leader change extends leases rather than expiring them in a burst, and
// keep-alives that were lost with the old leader cost nothing.
//
// An expiry is a decision of one leadership: it is proposed fenced to the
// epoch the countdown ran in (zab's SubmitAsLeader), so a member that has
// stopped leading, or was paused and resumed while another led, never
// commits what its stale countdowns decided. A keep-alive for a lease whose
// revocation is in flight waits for it: "not found" only once the revoke
// has committed, and a renewal if it did not.
type lessor struct {
	clock  func() time.Time
	minTTL int64
	// revoke proposes op as the leader of epoch (fenced to it).
	revoke func(ctx context.Context, epoch uint32, op *core.Op) (*core.Result, error)
	log    *slog.Logger

	mu     sync.Mutex
	leases map[int64]*leaseClock
	rng    *rand.Rand
	// revoking holds the leases whose revocation is being proposed; the
	// channel closes when that attempt ends, committed or not.
	revoking map[int64]chan struct{}
}

type leaseClock struct {
	ttlSeconds int64
	ttl        time.Duration
	deadline   time.Time
}

func newLessor(clock func() time.Time, minTTL int64, revoke func(context.Context, uint32, *core.Op) (*core.Result, error), log *slog.Logger) *lessor {
	seed := uint64(clock().UnixNano())
	return &lessor{
		clock: clock, minTTL: minTTL, revoke: revoke, log: log,
		leases: map[int64]*leaseClock{}, revoking: map[int64]chan struct{}{},
		rng: rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)),
	}
}

func lifetime(l *core.Lease) time.Duration {
	if l.Session != nil && l.Session.TimeoutMs > 0 {
		return time.Duration(l.Session.TimeoutMs) * time.Millisecond
	}
	return time.Duration(l.TTL) * time.Second
}

// load starts a countdown for every lease in the state.
func (ls *lessor) load(st *store.Store) error {
	v, err := st.Latest()
	if err != nil {
		return err
	}
	defer v.Close()
	now := ls.clock()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return v.Leases(func(l *core.Lease) bool {
		d := lifetime(l)
		ls.leases[l.ID] = &leaseClock{ttlSeconds: l.TTL, ttl: d, deadline: now.Add(d)}
		return true
	})
}

// observe follows applied grants and revokes.
func (ls *lessor) observe(entries []core.Entry, results []*core.Result) {
	now := ls.clock()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for i, e := range entries {
		if results[i].Err != nil {
			if e.Op.LeaseRevoke != nil && core.CodeOf(results[i].Err) == core.CodeLeaseNotFound {
				delete(ls.leases, e.Op.LeaseRevoke.ID)
			}
			continue
		}
		switch {
		case e.Op.LeaseGrant != nil:
			g := e.Op.LeaseGrant
			d := lifetime(&core.Lease{TTL: g.TTL, Session: g.Session})
			ls.leases[g.ID] = &leaseClock{ttlSeconds: g.TTL, ttl: d, deadline: now.Add(d)}
		case e.Op.LeaseRevoke != nil:
			delete(ls.leases, e.Op.LeaseRevoke.ID)
		}
	}
}

// NewID implements core.Lessor.
func (ls *lessor) NewID() int64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for {
		id := ls.rng.Int64() & (1<<62 - 1)
		if _, taken := ls.leases[id]; id != 0 && !taken {
			return id
		}
	}
}

// KeepAlive implements core.Lessor. A lease whose revocation is being
// proposed is answered once that proposal ends: not found if it committed,
// renewed if it did not.
func (ls *lessor) KeepAlive(ctx context.Context, id int64) (int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ttl, wait, err := ls.renew(id)
		if wait == nil {
			return ttl, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// renew restarts lease id's countdown, or returns the channel to wait on
// while its revocation is being proposed.
func (ls *lessor) renew(id int64) (ttl int64, wait <-chan struct{}, err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.leases[id]
	if !ok {
		return 0, nil, &core.Error{Code: core.CodeLeaseNotFound}
	}
	if done, busy := ls.revoking[id]; busy {
		return 0, done, nil
	}
	l.deadline = ls.clock().Add(l.ttl)
	return l.ttlSeconds, nil, nil
}

// Remaining implements core.Lessor.
func (ls *lessor) Remaining(id int64) (int64, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.leases[id]
	if !ok {
		return 0, false
	}
	return max(0, l.deadline.Sub(ls.clock()).Milliseconds()), true
}

// MinTTL implements core.Lessor.
func (ls *lessor) MinTTL() int64 { return ls.minTTL }

// run proposes, as the leader of epoch, the revocation of expired leases
// until ctx ends. The caller refreshes the countdowns first.
func (ls *lessor) run(ctx context.Context, every time.Duration, epoch uint32) {
	var wg sync.WaitGroup
	defer wg.Wait()
	runEvery(ctx, every, func() {
		for id, done := range ls.expired() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ls.expire(ctx, epoch, id, done)
			}()
		}
	})
}

// expired marks the leases past their deadline as being revoked.
func (ls *lessor) expired() map[int64]chan struct{} {
	now := ls.clock()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out map[int64]chan struct{}
	for id, l := range ls.leases {
		if _, busy := ls.revoking[id]; !busy && now.After(l.deadline) {
			if out == nil {
				out = map[int64]chan struct{}{}
			}
			done := make(chan struct{})
			ls.revoking[id] = done
			out[id] = done
		}
	}
	return out
}

// expire proposes lease id's revocation and then releases the keep-alives
// waiting on done.
func (ls *lessor) expire(ctx context.Context, epoch uint32, id int64, done chan struct{}) {
	defer func() {
		ls.mu.Lock()
		if ls.revoking[id] == done {
			delete(ls.revoking, id)
		}
		ls.mu.Unlock()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := ls.revoke(ctx, epoch, &core.Op{LeaseRevoke: &core.LeaseRevoke{ID: id}})
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, core.ErrLeaderChanged) {
			ls.log.Warn("lease expiry not committed; will retry", "lease", id, "err", err)
		}
		return // tried again next round while this member leads
	}
	ls.log.Debug("lease expired", "lease", id, "keys_deleted", res.Deleted)
}
