package zab

import (
	"context"
	"fmt"
	"sync"
)

// RoleChange is sent on RoleChanges whenever this member's role or leader
// changes.
type RoleChange struct {
	Role     Role
	LeaderID uint64 // 0 while looking
	Epoch    uint32 // the epoch of that leadership
}

// LeaderHandler serves CallLeader requests on the leader. It runs on its own
// goroutine per call; ctx ends when the caller gives up or the member stops.
type LeaderHandler func(ctx context.Context, payload []byte) ([]byte, error)

// RoleChanges returns a channel that receives every role change, starting
// with the role the member had when Open returned. The channel holds the
// most recent changes (64); when a consumer falls behind the oldest are
// dropped, so the last value received is always the current role. It is
// never closed; stop reading when Done is closed.
func (m *Member) RoleChanges() <-chan RoleChange { return m.roles.ch }

// SetLeaderHandler installs the function that serves CallLeader on this
// member while it leads. Calls that arrive before one is set fail.
func (m *Member) SetLeaderHandler(h LeaderHandler) { m.leaderHandler.Store(&h) }

// CallLeader runs payload through the leader's LeaderHandler and returns
// its answer: locally when this member leads, else over the transport. It
// fails with ErrNoLeader while no leader is known. The handler's error
// comes back as an error whose text is the handler's (its type is lost on
// the wire). zab does not interpret payloads.
func (m *Member) CallLeader(ctx context.Context, payload []byte) ([]byte, error) {
	return m.rep.callLeader(ctx, payload)
}

func (m *Member) callLocal(ctx context.Context, payload []byte) ([]byte, error) {
	h := m.leaderHandler.Load()
	if h == nil || *h == nil {
		return nil, fmt.Errorf("zab: call leader: no leader handler set")
	}
	return (*h)(ctx, payload)
}

// ReadIndex returns an index such that every entry committed before the
// call is at or below it. On the leader it first confirms, by a round of
// heartbeats answered by a quorum, that it still leads; elsewhere it asks
// the leader. For a linearizable read, call WaitApplied with the index and
// then read the local state.
func (m *Member) ReadIndex(ctx context.Context) (uint64, error) {
	return m.rep.readIndex(ctx)
}

// WaitApplied waits until the state machine has applied index. On a
// member that was removed it returns ErrRemoved for an index it will never
// apply.
func (m *Member) WaitApplied(ctx context.Context, index uint64) error {
	for {
		sig := m.applied.wait()
		if m.appliedIndex.Load() >= index {
			return nil
		}
		if after := m.removedAfter.Load(); after != 0 && index >= after {
			return ErrRemoved
		}
		select {
		case <-sig:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.stopCh:
			if m.appliedIndex.Load() >= index {
				return nil
			}
			return m.stoppedErr()
		}
	}
}

// markRemoved records that a committed configuration removed this member
// once everything through handed was handed to the applier, and wakes
// WaitApplied.
func (m *Member) markRemoved(handed uint64) {
	m.removedAfter.Store(handed + 1)
	m.applied.broadcast()
}

// setApplied records a new applied index and wakes WaitApplied.
func (m *Member) setApplied(index uint64) {
	m.appliedIndex.Store(index)
	m.applied.broadcast()
}

// appliedNotifier wakes every waiter each time the applied index moves.
type appliedNotifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next broadcast. Callers check their
// condition after calling wait, so a broadcast in between is not missed.
func (n *appliedNotifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *appliedNotifier) broadcast() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// roleFeed is a lossy, newest-wins channel of role changes.
type roleFeed struct {
	mu   sync.Mutex
	ch   chan RoleChange
	last RoleChange
}

func newRoleFeed() roleFeed { return roleFeed{ch: make(chan RoleChange, 64)} }

func (f *roleFeed) publish(rc RoleChange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rc == f.last {
		return
	}
	f.last = rc
	for {
		select {
		case f.ch <- rc:
			return
		default:
		}
		// Full: drop the oldest so the newest always gets in.
		select {
		case <-f.ch:
		default:
		}
	}
}
