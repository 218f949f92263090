package zabsim

import (
	"fmt"
	"slices"

	"github.com/januskv/janus/zab"
)

// reconfig carries out an EvReconfig: the leader of the latest epoch (if
// any member leads) proposes the change the event names against its
// active configuration. The generator cannot know that configuration, so
// a promotion or removal of a member the configuration does not hold in
// that role picks one that it does (by the event's member ID, so a replay
// picks the same). A change that cannot apply (a spare already added, no
// observer to promote, five voters already, removing one of the last two
// voters) or that comes while another is pending does nothing; the Core's
// own refusals (an observer not caught up) are counted, not failures.
func (s *sim) reconfig(e Event) {
	l := s.latestLeader()
	if l == nil {
		return
	}
	active, pending := l.core.Membership()
	if pending != nil {
		return
	}
	voters, observers := slices.Clone(active.Voters), slices.Clone(active.Observers)
	target := s.nodes[e.Member]
	if target == nil {
		return
	}
	switch e.Arg {
	case ReconfigAdd:
		// IDs are never reused: only a spare never started joins.
		if target.joined {
			return
		}
		observers = append(observers, e.Member)
	case ReconfigPromote:
		if len(observers) == 0 || len(voters) >= 5 {
			return
		}
		i := slices.Index(observers, e.Member)
		if i < 0 {
			i = int(e.Member % uint64(len(observers)))
		}
		voters = append(voters, observers[i])
		observers = slices.Delete(observers, i, i+1)
	case ReconfigRemove:
		i, j := slices.Index(voters, e.Member), slices.Index(observers, e.Member)
		if i < 0 && j < 0 {
			all := append(slices.Clone(voters), observers...)
			if k := int(e.Member % uint64(len(all))); k < len(voters) {
				i = k
			} else {
				j = k - len(voters)
			}
		}
		switch {
		case i >= 0 && len(voters) > 2:
			voters = slices.Delete(voters, i, i+1)
		case j >= 0:
			observers = slices.Delete(observers, j, j+1)
		default:
			return
		}
	default:
		return
	}
	next, err := zab.NewMembership(voters, observers)
	if err != nil {
		s.fail(s.chk.fail(l.id, "reconfig: %v", err))
		return
	}
	s.stats.Faults["reconfig-"+[...]string{ReconfigAdd: "add", ReconfigPromote: "promote", ReconfigRemove: "remove"}[e.Arg]]++
	l.reqSeq++
	l.waiters[l.reqSeq] = &waiter{}
	s.stats.Proposals++
	addrs := make(map[uint64]string)
	for _, id := range append(slices.Clone(next.Voters), next.Observers...) {
		addrs[id] = fmt.Sprintf("m%d:2888", id)
	}
	l.core.ProposeMembership(zab.MembershipChange{ReqID: l.reqSeq, Voters: next.Voters, Observers: next.Observers,
		Addrs: addrs, Version: active.Version, Time: l.wallClock()})
	l.readySoon()
	if _, p := l.core.Membership(); e.Arg == ReconfigAdd && p != nil {
		// Started with the configuration that adds it, as an operator
		// would start a new member with the new peer list, once the
		// leader took the change (a refused one left nothing pending).
		target.joined, target.startConf = true, next
		target.start()
	}
}
