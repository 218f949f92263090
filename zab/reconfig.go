package zab

import (
	"maps"
	"slices"
)

// The Core's side of membership changes (see "Membership changes" in
// docs/design.md): a configuration entry is pending from the moment it is
// in this member's log until this member knows it committed; then it is
// the active configuration, and the member's role follows it.

// notePending takes the configuration entry e, just put in this member's
// log (or found in it on start), as the pending configuration.
func (c *Core) notePending(e Entry) error {
	m, err := membershipOf(e)
	if err != nil {
		return err
	}
	if m.Version <= c.conf.Version {
		return nil // already active (a restart found it above the applied index)
	}
	c.setMembership(c.conf, &m)
	c.log.Info("zab membership pending", "id", c.id, "membership", m.String())
	return nil
}

// dropPendingAbove forgets the pending configuration if its entry was cut
// from the log (everything above index): the active one stands alone again.
func (c *Core) dropPendingAbove(index uint64) {
	if c.next != nil && c.next.Index > index {
		c.log.Info("zab pending membership cut from the log", "id", c.id, "membership", c.next.String())
		c.setMembership(c.conf, nil)
	}
}

// adoptCommitted takes m, a configuration another member says is
// committed (its entry may not be in this member's log yet), as the
// active one, and has the driver persist it.
func (c *Core) adoptCommitted(m *Membership) {
	if m == nil || m.Version <= c.conf.Version {
		return
	}
	next := c.next
	if next != nil && next.Version <= m.Version {
		next = nil
	}
	c.setMembership(cloneMembership(*m), next)
	if c.joining && !m.IsMember(c.id) {
		// Not persisted: a restart must join again, not find itself
		// in no configuration (see joined).
		return
	}
	c.rd.Membership = new(cloneMembership(*m))
	c.savedConf = m.Version
	c.log.Info("zab membership adopted from the leader", "id", c.id, "membership", m.String())
}

// notifiedMembership is the active configuration a notification carries,
// once it is not the starting one.
func (c *Core) notifiedMembership() *Membership {
	if c.conf.Version == 0 {
		return nil
	}
	return c.syncMembership()
}

// learnMembership takes a committed configuration another member names
// in a notification, if it is later than this member's active one (as
// ZooKeeper's election does with the configuration in its
// notifications): a member that missed the commit of its own promotion
// would otherwise never vote, and the voters that need its vote never
// elect anyone. A configuration is active only once committed, so
// whoever names it, it is committed; its entry reaches this member's log
// with the next synchronization. A looking member starts its election
// again, counting in the configurations it now has.
//
// A joining member takes no configuration that does not name it: it is
// started once its addition is proposed, and a member that has not yet
// learned that the addition committed (or a leader while it is pending)
// names an earlier configuration, which would remove this member for
// good. Its first SYNC gives it the leader's configurations.
func (c *Core) learnMembership(m *Membership) {
	if m == nil || m.Version <= c.conf.Version {
		return
	}
	if c.joining && !m.IsMember(c.id) {
		return
	}
	old := c.conf
	c.adoptCommitted(m)
	if c.ls == nil && c.fs == nil && c.role != RoleRemoved {
		c.el.start(c)
		return
	}
	c.followMembership(old)
}

// syncMembership is the active configuration a SYNC carries.
func (c *Core) syncMembership() *Membership { return new(cloneMembership(c.conf)) }

// cloneMembership returns a copy of m that shares nothing with it.
func cloneMembership(m Membership) Membership {
	m.Voters = append([]uint64(nil), m.Voters...)
	m.Observers = append([]uint64(nil), m.Observers...)
	m.Addrs = maps.Clone(m.Addrs)
	if m.Meta != nil {
		meta := make(map[uint64][]byte, len(m.Meta))
		for id, v := range m.Meta {
			meta[id] = slices.Clone(v)
		}
		m.Meta = meta
	}
	return m
}

// activateCommitted makes the pending configuration the active one once
// this member knows its entry committed.
func (c *Core) activateCommitted() {
	if c.next == nil || c.commit < c.next.Index {
		return
	}
	old := c.conf
	c.setMembership(*c.next, nil)
	c.log.Info("zab membership active", "id", c.id, "membership", c.conf.String())
	c.followMembership(old)
}

// followMembership adjusts this member's role to the active configuration
// that replaced old: a leader that no longer votes steps down (after this
// Ready's COMMIT), a leader stops serving removed members, a follower
// promoted or demoted says so.
func (c *Core) followMembership(old Membership) {
	switch {
	case !c.conf.IsMember(c.id):
		// checkRemoved ends its part.
	case c.ls != nil && !c.conf.IsVoter(c.id):
		c.becomeLooking("the active configuration no longer counts this leader's vote")
	case c.ls != nil:
		for _, id := range c.sortedPeers() {
			if !c.conf.IsMember(id) {
				delete(c.ls.peers, id)
			}
		}
	case c.fs != nil && c.fs.phase == fBroadcast && old.IsVoter(c.id) != c.conf.IsVoter(c.id):
		role := RoleObserver
		if c.conf.IsVoter(c.id) {
			role = RoleFollower
		}
		c.setRole(role, c.leader)
	}
}

// checkRemoved ends this member's part in the ensemble once no
// configuration in play names it (a committed change removed it). Until
// then, a member that a pending change adds or removes goes on as it was.
func (c *Core) checkRemoved() {
	if c.role == RoleRemoved || c.joining || c.isMember(c.id) {
		return
	}
	c.log.Info("zab removed from the ensemble", "id", c.id, "membership", c.conf.String())
	c.leaveRole()
	c.setRole(RoleRemoved, 0)
}

// Membership returns the active configuration and the pending one (nil if
// none), as this member knows them.
func (c *Core) Membership() (active Membership, pending *Membership) {
	active = cloneMembership(c.conf)
	if c.next != nil {
		pending = new(cloneMembership(*c.next))
	}
	return active, pending
}

// joined ends a joining member's wait once it is synchronized and a
// configuration in play names it: the configuration the leader sent is
// now this member's (adopted from it or from a notification, or still its
// starting one if the leader's is that), and its vote counts where that
// configuration says. A starting configuration is persisted here, so
// that a restart no longer joins; a later one was persisted when adopted,
// or will be when its entry is applied.
//
// The member is started once its addition is proposed, so the leader may
// synchronize it while the change is still pending and not in the SYNC
// (it follows as a PROPOSAL): the configurations it then holds do not
// name it yet. Until one does it stays joining: it is not removed (see
// checkRemoved) and persists no configuration that leaves it out, so
// that neither now nor after a restart does it take itself for a member
// that was removed, for good, while the ensemble counts it in.
//
// Its starting configuration (from its flags, version 0) names it only
// for want of a better one: it counts only while no later one is in play,
// that is when the leader's is the starting one too.
func (c *Core) joined() {
	named := c.next != nil && c.next.IsMember(c.id) ||
		c.conf.IsMember(c.id) && (c.conf.Version > 0 || c.next == nil)
	if !c.joining || !named {
		return
	}
	c.joining = false
	c.setMembership(c.conf, c.next)
	if c.conf.Version == 0 && c.rd.Membership == nil {
		c.rd.Membership = new(cloneMembership(c.conf))
	}
	c.log.Info("zab joined the ensemble", "id", c.id, "membership", c.conf.String(), "votes", c.voter)
}
