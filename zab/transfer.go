package zab

import (
	"errors"
	"fmt"
)

// Leader transfer (etcd's MoveLeader), which Zab itself does not have; see
// "Leader transfer" in docs/design.md. The leader stops proposing, waits
// until the target holds its whole log and a quorum has committed it, then
// sends every synchronized peer a TRANSFER and starts looking itself. A
// member that takes a TRANSFER looks for a leader at once, and in that
// election (only) a vote for the target wins a tie of (currentEpoch,
// lastZxid): the target has the leader's whole log, so it ties with the
// best history there is, and every member that heard of the transfer
// votes for it instead of for a higher ID. The member that asked learns
// the outcome when it follows the target in a later epoch, or when its
// deadline passes.

// Errors of a leader transfer.
var (
	// ErrBadTransferee refuses a transfer to a member that does not vote
	// in every configuration in play; nothing changes.
	ErrBadTransferee = errors.New("zab: leader transfer target is not a voter")
	// ErrTransferPending refuses a transfer while another is under way.
	ErrTransferPending = errors.New("zab: a leader transfer is already under way")
	// ErrTransferTimeout says the target did not become the leader within
	// the transfer's deadline (or another member did). The transfer is
	// over: the old leader proposes again if it still leads, or a normal
	// election follows.
	ErrTransferTimeout = errors.New("zab: leader transfer took too long")
)

// TransferDone answers a TransferLeadership by its ReqID: Err is nil once
// this member follows the target as the leader of a later epoch (or at
// once, for a transfer to this leader itself).
type TransferDone struct {
	ReqID uint64
	Err   error
}

// transferState is a transfer this member asked for, until it is answered.
type transferState struct {
	reqID, target uint64
	epoch         uint32 // the epoch this member led when it started
	// deadline is the tick by which the target must have caught up (and
	// the leader stepped down), then the tick by which it must lead.
	deadline    uint64
	steppedDown bool
}

// preference is what a TRANSFER told this member: until the tick until,
// in the next election, a vote for target with the history
// (epoch, zxid) beats every other vote with the same history.
type preference struct {
	target uint64
	epoch  uint32
	zxid   uint64
	until  uint64
}

// TransferLeadership asks this member, the leader, to hand leadership to
// target; Ready.Transfers answers it by reqID. Only a leader in broadcast
// takes it (ErrNotLeader), only for a voter of every configuration in
// play (ErrBadTransferee), one at a time (ErrTransferPending); a refusal
// changes nothing. A transfer to this leader itself succeeds at once, as
// etcd's MoveLeader does. While the transfer is under way the leader
// refuses new proposals (ErrNoLeader: nothing proposed) and membership
// changes, so that the target can catch up with a log that no longer
// grows; the refusal ends with the transfer.
func (c *Core) TransferLeadership(reqID, target uint64) {
	switch {
	case c.ls == nil || c.ls.phase != lBroadcast:
		c.transferDone(reqID, ErrNotLeader)
	case !c.conf.IsVoter(target) || (c.next != nil && !c.next.IsVoter(target)):
		c.transferDone(reqID, fmt.Errorf("%w: member %d", ErrBadTransferee, target))
	case target == c.id:
		c.transferDone(reqID, nil)
	case c.xfer != nil:
		c.transferDone(reqID, fmt.Errorf("%w (to member %d)", ErrTransferPending, c.xfer.target))
	default:
		c.xfer = &transferState{reqID: reqID, target: target, epoch: c.ls.epoch, deadline: c.now + c.etTicks}
		c.log.Info("zab leader transfer started", "id", c.id, "target", target, "epoch", c.ls.epoch)
		c.checkTransfer()
	}
}

func (c *Core) transferDone(reqID uint64, err error) {
	c.rd.Transfers = append(c.rd.Transfers, TransferDone{ReqID: reqID, Err: err})
}

// transferRefusal returns the error this leader refuses proposals with
// while a transfer is under way, or nil.
func (c *Core) transferRefusal() error {
	if c.xfer == nil || c.xfer.steppedDown {
		return nil
	}
	return fmt.Errorf("%w: leadership is being transferred to member %d", ErrNoLeader, c.xfer.target)
}

// checkTransfer steps down for the target once it holds this leader's
// whole log and all of it is committed (so every local proposal is
// answered before the leadership ends).
func (c *Core) checkTransfer() {
	x, ls := c.xfer, c.ls
	if x == nil || x.steppedDown || ls == nil || ls.phase != lBroadcast {
		return
	}
	ps := ls.peers[x.target]
	if ps == nil || ps.phase != pUpToDate || ps.acked < c.lastIndex || c.commit < c.lastIndex {
		return
	}
	msg := Message{Type: MsgTransfer, Epoch: ls.epoch, Leader: x.target, Zxid: c.lastZxid}
	for _, id := range c.sortedPeers() {
		if ls.peers[id].phase >= pSynced {
			c.send(id, msg)
		}
	}
	x.steppedDown = true
	// Time for an election, and its synchronization, to finish.
	x.deadline = c.now + 2*c.etTicks
	c.takePreference(msg)
	c.becomeLooking(fmt.Sprintf("transferring leadership to member %d", x.target))
}

// handleTransfer takes a TRANSFER from this member's leader: the leader
// steps down for msg.Leader, and this member looks for a leader now,
// preferring it.
func (c *Core) handleTransfer(msg *Message) {
	if fs := c.fs; fs == nil || fs.phase < fSynced || msg.Epoch != fs.epoch {
		return
	}
	c.takePreference(*msg)
	c.becomeLooking(fmt.Sprintf("leader %d transfers leadership to member %d", c.leader, msg.Leader))
}

func (c *Core) takePreference(msg Message) {
	c.prefer = preference{target: msg.Leader, epoch: msg.Epoch, zxid: msg.Zxid, until: c.now + 2*c.etTicks}
}

// preferred returns the vote for the transfer target, if this member
// prefers one now.
func (c *Core) preferred() (vote, bool) {
	p := c.prefer
	if p.target == 0 || c.now >= p.until || !c.isVoter(p.target) {
		return vote{}, false
	}
	return vote{leader: p.target, zxid: p.zxid, epoch: p.epoch}, true
}

// better orders votes as FastLeaderElection does, (epoch, zxid, id),
// except that a vote for a preferred transfer target wins a tie of
// (epoch, zxid). Histories are compared exactly as before: a member never
// votes for a history behind its own.
func (c *Core) better(a, b vote) bool {
	if a.epoch != b.epoch {
		return a.epoch > b.epoch
	}
	if a.zxid != b.zxid {
		return a.zxid > b.zxid
	}
	if p, ok := c.preferred(); ok && a.leader != b.leader {
		if a.leader == p.leader {
			return true
		}
		if b.leader == p.leader {
			return false
		}
	}
	return a.leader > b.leader
}

// startVote is the vote a member starts a round with: its own, or the
// preferred target's if that history is at least as good.
func (c *Core) startVote() vote {
	self := c.selfVote()
	if p, ok := c.preferred(); ok && !c.better(self, p) {
		return p
	}
	return self
}

// endPreference forgets the preference once an election decided.
func (c *Core) endPreference() { c.prefer = preference{} }

// noteTransferRole answers the transfer this member asked for when a new
// role settles it: following the target in a later epoch is success;
// leading, following someone else in a later epoch, losing the
// leadership before stepping down, or being removed is failure.
func (c *Core) noteTransferRole(role Role, leader uint64) {
	x := c.xfer
	if x == nil {
		return
	}
	var err error
	switch {
	case role == RoleRemoved:
		err = fmt.Errorf("%w: this member was removed", ErrTransferTimeout)
	case role == RoleLooking:
		if x.steppedDown {
			return
		}
		err = fmt.Errorf("%w: leadership lost before member %d caught up", ErrTransferTimeout, x.target)
	case c.ep.Current <= x.epoch:
		return
	case leader == x.target:
		c.log.Info("zab leader transfer done", "id", c.id, "leader", leader, "epoch", c.ep.Current)
	default:
		err = fmt.Errorf("%w: member %d leads epoch %d", ErrTransferTimeout, leader, c.ep.Current)
	}
	c.xfer = nil
	c.transferDone(x.reqID, err)
}

// transferTick ends a transfer whose deadline passed: a leader that did
// not step down proposes again, one that did goes on with the election.
func (c *Core) transferTick() {
	x := c.xfer
	if x == nil || c.now < x.deadline {
		return
	}
	c.xfer = nil
	c.log.Info("zab leader transfer timed out", "id", c.id, "target", x.target, "stepped_down", x.steppedDown)
	c.transferDone(x.reqID, fmt.Errorf("%w: member %d did not lead in time", ErrTransferTimeout, x.target))
}
