package zab

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
	quorumAt   uint64             // tick the current vote first had a quorum; 0 if not
	nextNotify uint64
	interval   uint64
	deadline   uint64
}

func (r *replica) selfVote() vote {
	return vote{leader: r.id, zxid: r.lastZxid, epoch: r.ep.Current}
}

func (e *election) start(r *replica) {
	e.round++
	e.vote = r.selfVote()
	e.recv = map[uint64]vote{}
	if r.voter {
		e.recv[r.id] = e.vote
	}
	e.ooe = map[uint64]Message{}
	e.quorumAt = 0
	e.interval = 1
	e.nextNotify = r.now + 1
	e.deadline = r.now + r.randomTicks()
	e.notifyAll(r)
	e.checkQuorum(r)
}

func (e *election) notification(r *replica) Message {
	state := stateLooking
	if !r.voter {
		state = stateObserving
	}
	return Message{Type: MsgNotification, State: state, Round: e.round, Leader: e.vote.leader, Zxid: e.vote.zxid, Epoch: e.vote.epoch}
}

func (e *election) notifyAll(r *replica) {
	msg := e.notification(r)
	for _, id := range r.voters {
		if id != r.id {
			r.send(id, msg)
		}
	}
}

func (e *election) tick(r *replica) {
	if e.quorumAt != 0 && r.now >= e.quorumAt+finalizeTicks {
		e.decide(r)
		return
	}
	if r.now >= e.nextNotify {
		e.notifyAll(r)
		e.interval = min(e.interval*2, r.etTicks)
		e.nextNotify = r.now + 1 + r.rng.Uint64N(e.interval)
	}
	if r.now >= e.deadline {
		// A round that cannot finish (votes lost, members gone) starts over,
		// at a random moment so that members do not keep colliding.
		e.start(r)
	}
}

func (e *election) decide(r *replica) {
	if e.vote.leader == r.id {
		r.becomeLeader()
	} else {
		r.becomeFollower(e.vote.leader)
	}
}

func (e *election) checkQuorum(r *replica) {
	if !r.voter {
		return
	}
	n := 0
	for _, v := range e.recv {
		if v == e.vote {
			n++
		}
	}
	if n >= r.quorum {
		if e.quorumAt == 0 {
			e.quorumAt = r.now
			if r.quorum == 1 {
				e.decide(r) // nobody else can change the outcome
			}
		}
	} else {
		e.quorumAt = 0
	}
}

// myNotification is what a member that is not looking tells a looking one.
func (r *replica) myNotification() Message {
	state := stateFollowing
	switch {
	case r.ls != nil:
		state = stateLeading
	case !r.voter:
		state = stateObserving
	}
	return Message{Type: MsgNotification, State: state, Round: r.el.round, Leader: r.leader, Epoch: r.ep.Current, Zxid: r.lastZxid}
}

func (r *replica) handleNotification(from uint64, msg *Message) {
	if r.ls != nil || r.fs != nil {
		if msg.State == stateLooking || msg.State == stateObserving {
			if r.ls != nil || r.voter {
				r.send(from, r.myNotification())
			}
		}
		return
	}
	e := &r.el
	v := vote{leader: msg.Leader, zxid: msg.Zxid, epoch: msg.Epoch}
	switch msg.State {
	case stateLooking:
		if !r.voter || !r.isVoter(from) {
			return
		}
		switch {
		case msg.Round > e.round:
			e.round = msg.Round
			e.recv = map[uint64]vote{}
			e.vote = r.selfVote()
			if v.better(e.vote) {
				e.vote = v
			}
			e.recv[r.id] = e.vote
			e.quorumAt = 0
			e.notifyAll(r)
		case msg.Round < e.round:
			r.send(from, e.notification(r))
			return
		case v.better(e.vote):
			e.vote = v
			e.recv[r.id] = e.vote
			e.quorumAt = 0
			e.notifyAll(r)
		}
		e.recv[from] = v
		e.checkQuorum(r)
	case stateFollowing, stateLeading:
		if !r.isVoter(from) {
			return
		}
		e.ooe[from] = *msg
		if msg.Round == e.round && r.voter {
			e.recv[from] = v
			e.checkQuorum(r)
		}
		e.checkEstablished(r, msg.Leader, msg.Epoch)
	}
}

func (r *replica) isVoter(id uint64) bool {
	_, ok := r.cfg.Peers[id]
	return ok
}

// checkEstablished joins leader if a quorum of voters (this member
// included, if it votes) says they follow it in epoch and it says it leads.
func (e *election) checkEstablished(r *replica, leader uint64, epoch uint32) {
	if leader == r.id || leader == 0 {
		return
	}
	lm, ok := e.ooe[leader]
	if !ok || lm.State != stateLeading || lm.Leader != leader || lm.Epoch != epoch {
		return
	}
	n := 0
	if r.voter {
		n++
	}
	for _, m := range e.ooe {
		if m.Leader == leader && m.Epoch == epoch {
			n++
		}
	}
	if n >= r.quorum {
		r.becomeFollower(leader)
	}
}
