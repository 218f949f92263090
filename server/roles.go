package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/store"
	"github.com/januskv/janus/zab"
)

// roleTracker remembers whether this member leads.
type roleTracker struct {
	leading atomic.Bool
}

// followRoles runs the leader's duties, the lessor and the reaper, while
// this member leads and stops them when it does not, until ctx ends or zab
// stops. Each new leadership starts every lease's countdown afresh: the
// old leader's countdowns died with it, and extending leases is safe where
// expiring them in a burst is not.
func (m *Member) followRoles(ctx context.Context) {
	var (
		stop  context.CancelFunc
		epoch uint32 // of the leadership the running duties serve
		wg    sync.WaitGroup
	)
	stopLeading := func() {
		if stop != nil {
			stop()
			wg.Wait()
			stop = nil
		}
	}
	defer stopLeading()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.zab.Done():
			m.roles.leading.Store(false)
			return
		case rc := <-m.zab.RoleChanges():
			leading := rc.Role == zab.RoleLeader
			m.log.Info("role changed", "role", rc.Role, "leader", rc.LeaderID, "epoch", rc.Epoch)
			if !leading {
				m.roles.leading.Store(false)
				stopLeading()
				continue
			}
			if stop != nil && epoch != rc.Epoch {
				// A later leadership of this member (the changes in
				// between were dropped): its countdowns start afresh.
				stopLeading()
			}
			if stop == nil {
				m.lessor.refresh()
				lctx, cancel := context.WithCancel(ctx)
				stop, epoch = cancel, rc.Epoch
				wg.Add(2)
				go func() {
					defer wg.Done()
					m.lessor.run(lctx, m.cfg.LeaseCheckInterval, epoch)
				}()
				go func() {
					defer wg.Done()
					m.reaper.run(lctx, m.cfg.ReaperInterval, epoch)
				}()
			}
			m.roles.leading.Store(true)
		}
	}
}

// refresh gives every lease a full TTL from now: called when this member
// starts owning leases, before its first expiry check.
func (ls *lessor) refresh() {
	now := ls.clock()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range ls.leases {
		l.deadline = now.Add(l.ttl)
	}
}

// reload replaces every countdown with the leases of st (after a snapshot
// restore), each with a full TTL.
func (ls *lessor) reload(st *store.Store) error {
	ls.mu.Lock()
	clear(ls.leases)
	ls.mu.Unlock()
	return ls.load(st)
}

// Leader calls carry lease questions from followers to the leader's lessor.
const (
	callKeepAlive byte = 1
	callRemaining byte = 2

	answerOK       byte = 0
	answerNotFound byte = 1
)

// remoteTimeout bounds a Remaining question to the leader, which the
// core.Lessor interface asks without a context.
const remoteTimeout = 2 * time.Second

// serveLeaderCall answers followers' lease calls on the leader.
func (m *Member) serveLeaderCall(ctx context.Context, payload []byte) ([]byte, error) {
	if len(payload) < 1 {
		return nil, errors.New("server: empty leader call")
	}
	if payload[0] == callChangeCluster || payload[0] == callMoveLeader {
		return m.serveMembershipCall(ctx, payload)
	}
	id, n := binary.Varint(payload[1:])
	if n <= 0 {
		return nil, errors.New("server: malformed leader call")
	}
	switch payload[0] {
	case callKeepAlive:
		ttl, err := m.keepAliveAsLeader(ctx, id)
		if core.CodeOf(err) == core.CodeLeaseNotFound {
			return []byte{answerNotFound}, nil
		}
		if err != nil {
			return nil, err
		}
		return binary.AppendVarint([]byte{answerOK}, ttl), nil
	case callRemaining:
		ms, ok := m.lessor.Remaining(id)
		if !ok {
			return []byte{answerNotFound}, nil
		}
		return binary.AppendVarint([]byte{answerOK}, ms), nil
	}
	return nil, fmt.Errorf("server: unknown leader call %d", payload[0])
}

// callLeader asks the leader's lessor about lease id.
func (m *Member) callLeader(ctx context.Context, kind byte, id int64) (int64, bool, error) {
	out, err := m.zab.CallLeader(ctx, binary.AppendVarint([]byte{kind}, id))
	if err != nil {
		return 0, false, clusterErr("lease call to the leader", err)
	}
	if len(out) == 1 && out[0] == answerNotFound {
		return 0, false, nil
	}
	if len(out) < 2 || out[0] != answerOK {
		return 0, false, errors.New("server: malformed answer from the leader")
	}
	v, n := binary.Varint(out[1:])
	if n <= 0 {
		return 0, false, errors.New("server: malformed answer from the leader")
	}
	return v, true, nil
}

// keepAliveAsLeader renews lease id with this member's lessor. "Not found"
// is final only once this member has applied everything committed: a new
// leader may not yet have applied the grant of a lease its predecessor
// committed, and a session told it expired never comes back.
func (m *Member) keepAliveAsLeader(ctx context.Context, id int64) (int64, error) {
	ttl, err := m.lessor.KeepAlive(ctx, id)
	if core.CodeOf(err) != core.CodeLeaseNotFound {
		return ttl, err
	}
	if err := m.zab.WaitApplied(ctx, m.zab.Status().CommittedIndex); err != nil {
		return 0, fmt.Errorf("catch up before answering lease %x: %w", id, err)
	}
	return m.lessor.KeepAlive(ctx, id)
}

// Leases implements core.Backend: the leader answers from its own lessor,
// any other member asks the leader.
func (m *Member) Leases() core.Lessor { return memberLessor{m} }

type memberLessor struct{ m *Member }

func (l memberLessor) NewID() int64  { return l.m.lessor.NewID() }
func (l memberLessor) MinTTL() int64 { return l.m.lessor.MinTTL() }

func (l memberLessor) KeepAlive(ctx context.Context, id int64) (int64, error) {
	if l.m.roles.leading.Load() {
		return l.m.keepAliveAsLeader(ctx, id)
	}
	ttl, found, err := l.m.callLeader(ctx, callKeepAlive, id)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, &core.Error{Code: core.CodeLeaseNotFound}
	}
	return ttl, nil
}

// Remaining on a follower asks the leader; when no leader answers in
// time it falls back to the local view, which knows whether the lease
// exists but not how recently it was kept alive.
func (l memberLessor) Remaining(id int64) (int64, bool) {
	if l.m.roles.leading.Load() {
		return l.m.lessor.Remaining(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	ms, found, err := l.m.callLeader(ctx, callRemaining, id)
	if err != nil {
		return l.m.lessor.Remaining(id)
	}
	return ms, found
}
