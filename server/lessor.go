package server

import (
	"context"
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
// every lease a fresh full TTL, so a leader change extends leases rather
// than expiring them in a burst.
type lessor struct {
	clock   func() time.Time
	minTTL  int64
	propose func(context.Context, *core.Op) (*core.Result, error)
	log     *slog.Logger

	mu       sync.Mutex
	leases   map[int64]*leaseClock
	rng      *rand.Rand
	revoking map[int64]bool
}

type leaseClock struct {
	ttlSeconds int64
	ttl        time.Duration
	deadline   time.Time
}

func newLessor(clock func() time.Time, minTTL int64, propose func(context.Context, *core.Op) (*core.Result, error), log *slog.Logger) *lessor {
	seed := uint64(clock().UnixNano())
	return &lessor{
		clock: clock, minTTL: minTTL, propose: propose, log: log,
		leases: map[int64]*leaseClock{}, revoking: map[int64]bool{},
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
			delete(ls.revoking, e.Op.LeaseRevoke.ID)
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

// KeepAlive implements core.Lessor.
func (ls *lessor) KeepAlive(ctx context.Context, id int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.leases[id]
	if !ok || ls.revoking[id] {
		return 0, &core.Error{Code: core.CodeLeaseNotFound}
	}
	l.deadline = ls.clock().Add(l.ttl)
	return l.ttlSeconds, nil
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

// run proposes the revocation of expired leases until ctx ends.
func (ls *lessor) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range ls.expired() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ls.revoke(ctx, id)
			}()
		}
	}
}

func (ls *lessor) expired() []int64 {
	now := ls.clock()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []int64
	for id, l := range ls.leases {
		if !ls.revoking[id] && now.After(l.deadline) {
			ls.revoking[id] = true
			out = append(out, id)
		}
	}
	return out
}

func (ls *lessor) revoke(ctx context.Context, id int64) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := ls.propose(ctx, &core.Op{LeaseRevoke: &core.LeaseRevoke{ID: id}})
	if err != nil {
		ls.mu.Lock()
		delete(ls.revoking, id) // try again next round
		ls.mu.Unlock()
		if ctx.Err() == nil {
			ls.log.Warn("lease expiry not committed; will retry", "lease", id, "err", err)
		}
		return
	}
	ls.log.Debug("lease expired", "lease", id, "keys_deleted", res.Deleted)
}
