package server

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/januskv/janus/zab"
)

// Interim: zab.Member's membership API (Membership, ChangeMembership,
// TransferLeadership) is being built on other branches. Until it is
// merged, these reach it when the zab.Member has it and otherwise show the
// starting configuration and refuse every change; this file goes away once
// the methods are in zab.

type membershipAPI interface {
	Membership() (zab.Membership, *zab.Membership)
	ChangeMembership(ctx context.Context, ch zab.MembershipChange) (zab.Membership, error)
}

type transferAPI interface {
	TransferLeadership(ctx context.Context, target uint64) error
}

var errNoMembershipAPI = errors.New("server: this build's zab cannot change the membership")

type zabShim struct{ m *Member }

func (m *Member) zabMembership() zabShim { return zabShim{m} }

func (s zabShim) Membership() (zab.Membership, *zab.Membership) {
	if api, ok := any(s.m.zab).(membershipAPI); ok {
		return api.Membership()
	}
	cfg := s.m.cfg
	if len(cfg.Peers) == 0 && len(cfg.Observers) == 0 {
		return zab.Membership{Voters: []uint64{cfg.ID}, LastID: cfg.ID}, nil
	}
	ms, _ := zab.NewMembership(slices.Sorted(maps.Keys(cfg.Peers)), slices.Sorted(maps.Keys(cfg.Observers)))
	ms.Addrs = maps.Clone(cfg.Peers)
	maps.Copy(ms.Addrs, cfg.Observers)
	return ms, nil
}

func (s zabShim) ChangeMembership(ctx context.Context, ch zab.MembershipChange) (zab.Membership, error) {
	if api, ok := any(s.m.zab).(membershipAPI); ok {
		return api.ChangeMembership(ctx, ch)
	}
	return zab.Membership{}, errNoMembershipAPI
}

func (s zabShim) TransferLeadership(ctx context.Context, target uint64) error {
	if api, ok := any(s.m.zab).(transferAPI); ok {
		return api.TransferLeadership(ctx, target)
	}
	return errNoMembershipAPI
}
