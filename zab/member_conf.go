package zab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrNotReplicated refuses a membership change on a single member
// started with no peer address (Config.Peers empty): peers added to its
// configuration would have no address to reach it at, so it could never
// commit with them. Nothing was proposed.
var ErrNotReplicated = errors.New("zab: a single member with no peer address cannot change its membership")

// Membership returns this member's view of the active configuration and
// of the pending one (nil if none); both are copies.
func (m *Member) Membership() (active Membership, pending *Membership) {
	return m.rep.membership()
}

// ChangeMembership proposes ch, on the leader, as the configuration that
// replaces version ch.Version, and returns once its entry is applied on
// this member, with the configuration it made active. ch.ReqID and ch.Time
// are set here. A refusal proposes nothing: ErrNotLeader (a follower
// forwards the change to its leader itself), ErrChangePending,
// ErrStaleMembership, ErrNotCaughtUp, ErrNotReplicated on a single member
// with no peer address, or an error naming what is wrong with the configuration. If ctx ends
// first, the change may still commit.
func (m *Member) ChangeMembership(ctx context.Context, ch MembershipChange) (Membership, error) {
	if m.rep.noAddress {
		return Membership{}, ErrNotReplicated
	}
	if err := ctx.Err(); err != nil {
		return Membership{}, err
	}
	ch.Voters, ch.Observers = slices.Clone(ch.Voters), slices.Clone(ch.Observers)
	p, err := m.rep.submitChange(ctx, ch)
	if err != nil {
		return Membership{}, err
	}
	pd := &Pending{m: m, p: p, rep: m.rep}
	if _, err := pd.Wait(ctx); err != nil {
		return Membership{}, err
	}
	if p.conf == nil {
		// Answered by an entry that carried no configuration: cannot
		// happen, as the Core appends the change under this request ID.
		return Membership{}, fmt.Errorf("zab: membership change %d answered without a configuration", p.reqID)
	}
	return *p.conf, nil
}

// submitChange registers a membership change as a proposal and queues it
// for the protocol loop.
func (r *replica) submitChange(ctx context.Context, ch MembershipChange) (*proposal, error) {
	p := &proposal{ctx: ctx, done: make(chan result, 1), change: &ch}
	return p, r.enqueue(p)
}

// membership returns copies of the configurations the loop last
// published.
func (r *replica) membership() (Membership, *Membership) {
	r.smu.Lock()
	defer r.smu.Unlock()
	active := cloneMembership(r.conf)
	var pending *Membership
	if r.next != nil {
		pending = new(cloneMembership(*r.next))
	}
	return active, pending
}

// publishMembership copies the Core's configurations for Membership when
// they changed since the last Ready.
func (r *replica) publishMembership() {
	c := r.core
	same := func(a, b *Membership) bool {
		return (a == nil) == (b == nil) && (a == nil || (a.Version == b.Version && a.Index == b.Index))
	}
	r.smu.Lock()
	changed := !same(&r.conf, &c.conf) || !same(r.next, c.next) || !r.confSet
	r.smu.Unlock()
	if !changed {
		return
	}
	active, pending := c.Membership()
	r.smu.Lock()
	r.conf, r.next, r.confSet = active, pending, true
	r.smu.Unlock()
	if ps, ok := r.tr.(PeerSetter); ok {
		addrs := maps.Clone(active.Addrs)
		if pending != nil {
			maps.Copy(addrs, pending.Addrs)
		}
		ps.SetPeers(addrs)
	}
}
