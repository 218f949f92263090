package zab

import "slices"

// Fast leader election, after ZooKeeper's FastLeaderElection. A looking
// member votes for the best (currentEpoch, lastZxid, id) it has heard of in
// the highest round it knows, tells every voter whenever its vote changes,
// and decides once a quorum of voters has held the same vote in its round
// for finalizeTicks without a better one arriving. A member that already
// follows or leads answers a looking member with its leader, and a looking
// member that hears from a quorum (itself included) agreeing on a leader
// that says it leads joins that leader directly.
//
// Deciding is not leading: the chosen leader still has to gather a quorum
// in discovery, which is where safety comes from. A wrong or stale decision
// only costs a timeout.

type vote struct {
	leader uint64
	zxid   uint64
	epoch  uint32
}

func (a vote) better(b vote) bool {
	if a.epoch != b.epoch {
		return a.epoch > b.epoch
	}
	if a.zxid != b.zxid {
		return a.zxid > b.zxid
	}
	return a.leader > b.leader
}

type election struct {
	round      uint64
	vote       vote
	recv       map[uint64]vote    // looking voters' votes in this round
	ooe        map[uint64]Message // notifications from members out of the election
	quorumAt   uint64             // 1 + the tick the current vote first had a quorum; 0 if not (a quorum at tick 0 counts too)
	nextNotify uint64
	interval   uint64
	deadline   uint64
}

func (c *Core) selfVote() vote {
	return vote{leader: c.id, zxid: c.lastZxid, epoch: c.ep.Current}
}

func (e *election) start(c *Core) {
	e.round++
	e.vote = c.startVote()
	e.recv = map[uint64]vote{}
	if c.voter {
		e.recv[c.id] = e.vote
	}
	e.ooe = map[uint64]Message{}
	e.quorumAt = 0
	e.interval = 1
	e.nextNotify = c.now + 1
	e.deadline = c.now + c.randomTicks()
	e.notifyAll(c)
	e.checkQuorum(c)
}

func (e *election) notification(c *Core) Message {
	state := stateLooking
	if !c.voter {
		state = stateObserving
	}
	return Message{Type: MsgNotification, State: state, Round: e.round, Leader: e.vote.leader, Zxid: e.vote.zxid, Epoch: e.vote.epoch,
		Membership: c.notifiedMembership()}
}

func (e *election) notifyAll(c *Core) {
	msg := e.notification(c)
	ids := c.voterIDs()
	// The member voted for hears the vote even if no configuration this
	// member knows lets it vote: a pending one in its log may (a promoted
	// observer that holds the change while this member does not), and
	// without these votes it never counts a quorum of the configurations
	// it knows, while the voters that chose it wait for it to lead.
	if l := e.vote.leader; l != c.id && !slices.Contains(ids, l) {
		ids = append(ids, l)
	}
	for _, id := range ids {
		if id != c.id {
			c.send(id, msg)
		}
	}
}

func (e *election) tick(c *Core) {
	if e.quorumAt != 0 && c.now+1 >= e.quorumAt+finalizeTicks {
		e.decide(c)
		return
	}
	if c.now >= e.nextNotify {
		e.notifyAll(c)
		e.interval = min(e.interval*2, c.etTicks)
		e.nextNotify = c.now + 1 + c.rng.Uint64N(e.interval)
	}
	if c.now >= e.deadline {
		// A round that cannot finish (votes lost, members gone) starts over,
		// at a random moment so that members do not keep colliding.
		e.start(c)
	}
}

func (e *election) decide(c *Core) {
	c.endPreference()
	if e.vote.leader == c.id {
		c.becomeLeader()
	} else {
		c.becomeFollower(e.vote.leader)
	}
}

func (e *election) checkQuorum(c *Core) {
	if !c.voter {
		return
	}
	if c.quorum(func(id uint64) bool { v, ok := e.recv[id]; return ok && v == e.vote }) {
		if e.quorumAt == 0 {
			e.quorumAt = c.now + 1
			if c.soleVoter() {
				e.decide(c) // nobody else can change the outcome
			}
		}
	} else {
		e.quorumAt = 0
	}
}

// myNotification is what a member that is not looking tells a looking one.
func (c *Core) myNotification() Message {
	state := stateFollowing
	switch {
	case c.ls != nil:
		state = stateLeading
	case !c.voter:
		state = stateObserving
	}
	return Message{Type: MsgNotification, State: state, Round: c.el.round, Leader: c.leader, Epoch: c.ep.Current, Zxid: c.lastZxid,
		Membership: c.notifiedMembership()}
}

func (c *Core) handleNotification(from uint64, msg *Message) {
	c.learnMembership(msg.Membership)
	if c.ls != nil || c.fs != nil {
		if msg.State == stateLooking || msg.State == stateObserving {
			if c.ls != nil || c.voter {
				c.send(from, c.myNotification())
			}
		}
		return
	}
	e := &c.el
	v := vote{leader: msg.Leader, zxid: msg.Zxid, epoch: msg.Epoch}
	switch msg.State {
	case stateLooking:
		if !c.voter || !c.isVoter(from) {
			return
		}
		switch {
		case msg.Round > e.round:
			e.round = msg.Round
			e.recv = map[uint64]vote{}
			e.vote = c.startVote()
			if c.better(v, e.vote) {
				e.vote = v
			}
			e.recv[c.id] = e.vote
			e.quorumAt = 0
			e.notifyAll(c)
		case msg.Round < e.round:
			c.send(from, e.notification(c))
			return
		case c.better(v, e.vote):
			e.vote = v
			e.recv[c.id] = e.vote
			e.quorumAt = 0
			e.notifyAll(c)
		}
		e.recv[from] = v
		e.checkQuorum(c)
	case stateFollowing, stateLeading:
		if !c.isVoter(from) {
			return
		}
		e.ooe[from] = *msg
		if msg.Round == e.round && c.voter {
			// A member that decided in this round for the leader this
			// member votes for agrees with this vote, whatever history
			// it names (its own, not the vote's). Counted by its own
			// history, it would undo its vote here: a candidate whose
			// log holds a pending change counts a quorum of that
			// configuration too, which voters that do not hold the
			// change do not wait for; they decide first, and the
			// candidate, never counting them again, would never decide
			// while they wait for it to lead (as ZooKeeper's election
			// does, a quorum of FOLLOWING notifications for this member
			// in its round makes it lead).
			if msg.Leader == e.vote.leader {
				v = e.vote
			}
			e.recv[from] = v
			e.checkQuorum(c)
		}
		e.checkEstablished(c, msg.Leader, msg.Epoch)
	}
}

// checkEstablished joins leader if a quorum of voters (this member
// included, if it votes) says they follow it in epoch and it says it leads.
func (e *election) checkEstablished(c *Core, leader uint64, epoch uint32) {
	if leader == c.id || leader == 0 {
		return
	}
	lm, ok := e.ooe[leader]
	if !ok || lm.State != stateLeading || lm.Leader != leader || lm.Epoch != epoch {
		return
	}
	agrees := func(id uint64) bool {
		if id == c.id {
			return c.voter // a joining member listed as a voter has no vote yet
		}
		m, ok := e.ooe[id]
		return ok && m.Leader == leader && m.Epoch == epoch
	}
	if c.quorum(agrees) {
		c.endPreference()
		c.becomeFollower(leader)
	}
}
