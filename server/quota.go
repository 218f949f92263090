package server

import (
	"context"
	"slices"

	"github.com/januskv/janus/core"
)

// DefaultQuotaBytes is etcd's default space quota (--quota-backend-bytes
// 0): 2 GiB.
const DefaultQuotaBytes = 2 << 30

// quotaBytes resolves a configured quota as etcd resolves
// --quota-backend-bytes: 0 means the default, a negative quota turns the
// check off (returned as 0).
func quotaBytes(configured int64) int64 {
	switch {
	case configured == 0:
		return DefaultQuotaBytes
	case configured < 0:
		return 0
	}
	return configured
}

// admit decides whether a client's op may be proposed: a member that a
// CORRUPT alarm names proposes nothing but alarm changes, and an op that
// would grow the state is refused while NOSPACE is active or when it would
// take the state past the quota. In the last case the member raises
// NOSPACE through the log first, as etcd's quota check does, so every
// member then refuses growing ops in Apply (core.CheckSpace). The state's
// size is the store's size on disk, measured at most once a second. The
// data directory's free space is looked at once (through the member's
// diskspace.Gauge, which spares most statfs calls), for this member's own
// NOSPACE alarm and for refuseIfFull.
func (m *Member) admit(ctx context.Context, op *core.Op) error {
	if op.Alarm == nil && m.Corrupt() {
		return core.ErrCorrupt
	}
	full := m.NoSpace()
	alarms := localAlarms(m.replicatedAlarms(), m.cfg.ID, full)
	if err := core.CheckSpace(alarms, op); err != nil {
		return err
	}
	if err := refuseIfFull(op, full); err != nil {
		return err
	}
	cost := core.SpaceCost(op)
	if cost == 0 || m.quota <= 0 {
		return nil
	}
	ref, _ := m.current()
	st, err := ref.st.Status()
	if err != nil {
		// Not knowing the size is no reason to refuse a write; the
		// next check measures again.
		m.log.Warn("space quota: size on disk unknown", "err", err)
		return nil
	}
	if st.DBSize+cost < m.quota {
		return nil
	}
	mine := core.Alarm{Member: m.cfg.ID, Type: core.AlarmNoSpace}
	if !slices.Contains(alarms, mine) {
		m.log.Warn("space quota exceeded: raising NOSPACE", "size", st.DBSize, "cost", cost, "quota", m.quota)
		if _, err := m.propose(ctx, &core.Op{Alarm: &core.AlarmChange{Activate: true, Alarm: mine}}); err != nil {
			m.log.Warn("raise NOSPACE", "err", err)
		}
	}
	return core.ErrNoSpace
}
