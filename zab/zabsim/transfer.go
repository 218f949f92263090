package zabsim

import (
	"errors"
	"slices"

	"github.com/januskv/janus/zab"
)

// transferReq is a leader transfer a member asked its Core for.
type transferReq struct {
	target uint64
	epoch  uint32 // the epoch the member led when it asked
	refuse bool   // the target is not a voter: the Core must refuse
}

// transfer carries out an EvTransfer: the leader of the latest epoch (if
// any member leads) is asked to hand its leadership to the event's
// member, or (see EvTransfer) to a voter of its active configuration.
func (s *sim) transfer(e Event) {
	l := s.latestLeader()
	if l == nil {
		return
	}
	active, pending := l.core.Membership()
	target := e.Member
	if !active.IsVoter(target) && e.Arg != 1 {
		target = active.Voters[int(e.Member%uint64(len(active.Voters)))]
	}
	voter := func(m *zab.Membership) bool { return m == nil || m.IsVoter(target) }
	s.stats.Faults["transfer"]++
	l.reqSeq++
	l.transfers[l.reqSeq] = transferReq{target: target, epoch: l.epoch, refuse: !voter(&active) || !voter(pending)}
	l.core.TransferLeadership(l.reqSeq, target)
	l.readySoon()
}

// transferDone checks the answer to a leader transfer: one that succeeded
// ended with the target leading an epoch after the one this member led
// when it asked, as the checker recorded it; one to a non-voter was
// refused.
func (n *node) transferDone(x zab.TransferDone) {
	s := n.s
	req, ok := n.transfers[x.ReqID]
	if !ok {
		s.fail(s.chk.fail(n.id, "an answer to transfer %d, which was never asked or already answered", x.ReqID))
		return
	}
	delete(n.transfers, x.ReqID)
	s.stats.Checks["transfer-answer"]++
	switch {
	case req.refuse:
		// A member the simulator saw leading may not be in broadcast
		// yet; it refuses everything with ErrNotLeader first.
		if !errors.Is(x.Err, zab.ErrBadTransferee) && !errors.Is(x.Err, zab.ErrNotLeader) {
			s.fail(s.chk.fail(n.id, "transfer %d to non-voter %d answered %v", x.ReqID, req.target, x.Err))
		}
		s.stats.Faults["transfer-refused"]++
	case x.Err != nil:
		kind := "transfer-failed"
		switch {
		case errors.Is(x.Err, zab.ErrTransferTimeout):
			kind = "transfer-timeout"
		case errors.Is(x.Err, zab.ErrTransferPending):
			kind = "transfer-busy"
		case errors.Is(x.Err, zab.ErrNotLeader):
			kind = "transfer-notleader"
		case errors.Is(x.Err, zab.ErrBadTransferee):
			kind = "transfer-badtarget" // a pending change removes it
		}
		s.stats.Faults[kind]++
	case req.target == n.id:
		s.stats.Faults["transfer-self"]++
	default:
		s.stats.Faults["transfer-ok"]++
		s.fail(s.chk.transferred(n.id, req.target, req.epoch, n.epoch))
	}
}

// ledBy reports the epochs the checker saw target lead.
func (c *checker) ledBy(target uint64) []uint32 {
	var epochs []uint32
	for e, l := range c.leaders {
		if l == target {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)
	return epochs
}

// transferred checks a transfer the member that asked reports done: the
// target established its leadership of the epoch the member now follows,
// which is later than the one the member led when it asked.
func (c *checker) transferred(member, target uint64, from, now uint32) error {
	c.checks["transfer-target-leads"]++
	if now <= from {
		return c.fail(member, "transfer to %d reported done in epoch %d, not after epoch %d", target, now, from)
	}
	if l, ok := c.leaders[now]; !ok || l != target {
		return c.fail(member, "transfer to %d reported done in epoch %d, which member %d leads (%d led epochs %v)",
			target, now, l, target, c.ledBy(target))
	}
	return nil
}
