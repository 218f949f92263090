package zab

import (
	"fmt"
	"math"
)

// A leader goes through discovery (FOLLOWERINFO from a quorum; the new
// epoch, above every acceptedEpoch it heard, persisted as its own
// acceptedEpoch; LEADERINFO), synchronization (each follower's ACKEPOCH
// answered by one SYNC; currentEpoch persisted once a quorum acknowledged
// the epoch; UPTODATE once a quorum acknowledged NEWLEADER) and broadcast.
// Its whole log is its initial history: it is committed when a quorum
// acknowledges NEWLEADER, and new proposals start only after that.

type leaderPhase int

const (
	lDiscover  leaderPhase = iota // gathering FOLLOWERINFO
	lSync                         // epoch persisted; waiting for a quorum of ACKNEWLEADER
	lBroadcast                    // proposing
)

type peerPhase int

const (
	pNone     peerPhase = iota // FOLLOWERINFO seen, no epoch yet
	pInfo                      // LEADERINFO sent
	pSnapping                  // waiting for a snapshot to send
	pSynced                    // SYNC sent; in the forwarding set
	pUpToDate                  // NEWLEADER acknowledged
)

type peerState struct {
	nonce    uint64
	accepted uint32
	phase    peerPhase
	seq      uint64
	syncMsg  *Message // resent while the follower repeats ACKEPOCH
	acked    uint64   // durable on the follower, under seq
	hbSeq    uint64   // highest heartbeat round it answered
	heard    uint64
	// epochAcked says the peer acknowledged the new epoch (ACKEPOCH) with
	// a history no better than the leader's, ending at (ackZxid, ackIndex);
	// its SYNC waits for the epoch quorum.
	epochAcked        bool
	ackZxid, ackIndex uint64
	// syncAwaits, when not 0, is the index the leader's own log must be
	// durable through before this peer's SYNC is decided (see startSync);
	// LogDurable starts it.
	syncAwaits uint64
	// readsV2 says its last FOLLOWERINFO announced that it decodes
	// message version 2 (FlagReadsV2); a membership change waits for it.
	readsV2 bool
}

// pendingRead is a ReadIndex waiting for its heartbeat round: a local one
// (answered in Ready.Answers by id) or a follower's (answered with a
// READINDEXRESP to from, by nonce).
type pendingRead struct {
	seq   uint64
	index uint64
	local bool
	id    uint64
	from  uint64
	nonce uint64
}

func (c *Core) answerRead(rd pendingRead, index uint64, err error) {
	if rd.local {
		c.answer(Answer{ID: rd.id, Index: index, Err: err})
		return
	}
	resp := Message{Type: MsgReadIndexResp, Nonce: rd.nonce, Index: index}
	if err != nil {
		resp.Err = err.Error()
	}
	c.send(rd.from, resp)
}

type leaderState struct {
	phase        leaderPhase
	epoch        uint32 // the new epoch, 0 until chosen
	peers        map[uint64]*peerState
	ackedEpoch   map[uint64]bool
	deadline     uint64
	counter      uint32
	hbSeq        uint64
	reads        []pendingRead
	seqGen       uint64
	resendMark   uint64
	seen         map[[2]uint64]struct{}
	seenOrder    [][2]uint64
	currentSaved bool
}

const maxSeenRequests = 1 << 16

func (ls *leaderState) failReads(c *Core, err error) {
	for _, rd := range ls.reads {
		c.answerRead(rd, 0, err)
	}
	ls.reads = nil
}

// remember records a proposer's request so a duplicated REQUEST is not
// proposed twice.
func (ls *leaderState) remember(origin, reqID uint64) bool {
	k := [2]uint64{origin, reqID}
	if _, dup := ls.seen[k]; dup {
		return false
	}
	ls.seen[k] = struct{}{}
	ls.seenOrder = append(ls.seenOrder, k)
	if len(ls.seenOrder) > maxSeenRequests {
		delete(ls.seen, ls.seenOrder[0])
		ls.seenOrder = ls.seenOrder[1:]
	}
	return true
}

func (c *Core) becomeLeader() {
	c.leaveRole()
	c.leader = c.id
	c.ls = &leaderState{
		peers:      map[uint64]*peerState{},
		ackedEpoch: map[uint64]bool{},
		deadline:   c.now + c.randomTicks(),
		seen:       map[[2]uint64]struct{}{},
	}
	c.log.Info("zab elected; discovering", "id", c.id, "last_zxid", FormatZxid(c.lastZxid))
	c.checkDiscovery()
}

func (c *Core) leaderHandle(from uint64, msg *Message, now int64) {
	ls := c.ls
	ps := ls.peers[from]
	switch msg.Type {
	case MsgFollowerInfo:
		if !c.isMember(from) {
			return // not in any configuration in play
		}
		if ps == nil || ps.nonce != msg.Nonce {
			ps = &peerState{nonce: msg.Nonce, accepted: msg.Epoch}
			ls.peers[from] = ps
		}
		ps.readsV2 = msg.Flags&FlagReadsV2 != 0
		ps.heard = c.now
		if ls.epoch == 0 {
			c.checkDiscovery()
			return
		}
		if ps.phase == pNone {
			ps.phase = pInfo
		}
		c.send(from, Message{Type: MsgLeaderInfo, Epoch: ls.epoch, Nonce: ps.nonce})
	case MsgAckEpoch:
		if ps == nil || msg.Nonce != ps.nonce || msg.Epoch != ls.epoch || ls.epoch == 0 {
			return
		}
		ps.heard = c.now
		switch {
		case ps.phase == pInfo:
			if c.isVoter(from) {
				fv := vote{epoch: uint32(msg.Round), zxid: msg.Zxid}
				if fv.better(vote{epoch: c.ep.Current, zxid: c.lastZxid}) {
					c.becomeLooking(fmt.Sprintf("follower %d has a later history (epoch %d, zxid %s)", from, fv.epoch, FormatZxid(fv.zxid)))
					return
				}
				ls.ackedEpoch[from] = true
			}
			// No SYNC before a quorum has acknowledged the epoch with no
			// better history than this leader's (ZooKeeper's
			// waitForEpochAck before NEWLEADER): a follower that installed
			// one would persist the new currentEpoch, and if this leader
			// then gave up for a follower with a later history, that
			// epoch would win the next election for a history missing
			// committed entries, and truncate them elsewhere.
			ps.epochAcked, ps.ackZxid, ps.ackIndex = true, msg.Zxid, msg.Index
			if ls.currentSaved {
				c.startSync(from, ps, msg.Zxid, msg.Index)
				return
			}
			c.checkEpochQuorum()
		case ps.phase >= pSynced && ps.syncMsg != nil:
			c.send(from, *ps.syncMsg)
		}
	case MsgAckNewLeader:
		if ps == nil || msg.Epoch != ls.epoch || msg.Seq != ps.seq || ps.phase < pSynced {
			return
		}
		ps.heard = c.now
		ps.acked = max(ps.acked, msg.Index)
		ps.syncMsg = nil
		ps.phase = pUpToDate
		if ls.phase == lBroadcast {
			c.send(from, Message{Type: MsgUpToDate, Epoch: ls.epoch, Seq: ps.seq, Commit: c.commit})
		} else {
			c.checkNewLeaderQuorum()
		}
	case MsgAck:
		if ps == nil || msg.Epoch != ls.epoch || msg.Seq != ps.seq || ps.phase < pSynced {
			return
		}
		ps.heard = c.now
		ps.acked = max(ps.acked, msg.Index)
	case MsgHeartbeatAck:
		if ps == nil || msg.Epoch != ls.epoch || msg.Seq != ps.seq || ps.phase < pSynced {
			return
		}
		ps.heard = c.now
		ps.acked = max(ps.acked, msg.Index)
		if msg.Nonce == ls.hbSeq && ps.hbSeq < msg.Nonce {
			c.rd.RoundTrips = append(c.rd.RoundTrips, RoundTrip{Peer: from, Round: msg.Nonce})
		}
		ps.hbSeq = max(ps.hbSeq, msg.Nonce)
		c.checkReads()
	case MsgRequest:
		if ls.phase != lBroadcast || msg.Epoch != ls.epoch {
			// Only the leader of the request's epoch can vouch that it
			// proposed nothing; another may have.
			err := ErrLeaderChanged
			if msg.Epoch == ls.epoch {
				err = ErrNoLeader
			}
			c.send(from, Message{Type: MsgRequestFail, ReqID: msg.ReqID, Err: err.Error()})
			return
		}
		if !ls.remember(msg.Origin, msg.ReqID) {
			return // a duplicate of a request already proposed (or refused)
		}
		if c.transferRefusal() != nil {
			// Nothing proposed: the origin may propose again to the next
			// leader. Only after the duplicate check: a late copy of a
			// request proposed before the transfer began must not be
			// answered "nothing proposed".
			c.send(from, Message{Type: MsgRequestFail, ReqID: msg.ReqID, Err: ErrNoLeader.Error()})
			return
		}
		if !c.leaderAppend(msg.Origin, msg.ReqID, EntryData, msg.Data, now) {
			c.send(from, Message{Type: MsgRequestFail, ReqID: msg.ReqID, Err: ErrNoLeader.Error()})
		}
	case MsgReadIndex:
		if ls.phase != lBroadcast {
			c.send(from, Message{Type: MsgReadIndexResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
			return
		}
		c.leaderRead(pendingRead{from: from, nonce: msg.Nonce})
	case MsgCall:
		if ls.phase != lBroadcast {
			c.send(from, Message{Type: MsgCallResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
			return
		}
		c.rd.Calls = append(c.rd.Calls, LeaderCall{From: from, Nonce: msg.Nonce, Payload: msg.Data})
	}
}

// checkDiscovery chooses the new epoch once a quorum of voters (the leader
// included) has sent FOLLOWERINFO.
func (c *Core) checkDiscovery() {
	ls := c.ls
	if ls.epoch != 0 {
		return
	}
	maxAccepted := max(c.ep.Accepted, c.ep.Current)
	for _, ps := range ls.peers {
		maxAccepted = max(maxAccepted, ps.accepted)
	}
	if !c.quorum(func(id uint64) bool { return id == c.id || ls.peers[id] != nil }) {
		return
	}
	if maxAccepted == math.MaxUint32 {
		c.fatal(fmt.Errorf("epoch space exhausted"))
		return
	}
	newEpoch := maxAccepted + 1
	// Persisted before it is announced: LEADERINFO goes out in the Ready
	// that persists it.
	c.persistEpochs(Epochs{Accepted: newEpoch, Current: c.ep.Current})
	ls.epoch = newEpoch
	ls.ackedEpoch[c.id] = true
	c.log.Info("zab new epoch", "id", c.id, "epoch", newEpoch)
	for _, id := range c.sortedPeers() {
		ps := ls.peers[id]
		ps.phase = pInfo
		c.send(id, Message{Type: MsgLeaderInfo, Epoch: newEpoch, Nonce: ps.nonce})
	}
	c.checkEpochQuorum()
}

func (c *Core) checkEpochQuorum() {
	ls := c.ls
	if ls == nil || ls.currentSaved || !c.quorum(func(id uint64) bool { return ls.ackedEpoch[id] }) {
		return
	}
	c.persistEpochs(Epochs{Accepted: c.ep.Accepted, Current: ls.epoch})
	ls.currentSaved = true
	ls.phase = lSync
	for _, id := range c.sortedPeers() {
		if ps := ls.peers[id]; ps.phase == pInfo && ps.epochAcked {
			c.startSync(id, ps, ps.ackZxid, ps.ackIndex)
		}
	}
	c.checkNewLeaderQuorum()
}

func (c *Core) checkNewLeaderQuorum() {
	ls := c.ls
	if ls.phase != lSync {
		return
	}
	upToDate := func(id uint64) bool {
		ps := ls.peers[id]
		return id == c.id || (ps != nil && ps.phase == pUpToDate)
	}
	if !c.quorum(upToDate) {
		return
	}
	// A quorum holds the leader's whole log and the new epoch: all of it is
	// committed.
	ls.phase = lBroadcast
	c.commit = max(c.commit, c.durable)
	ls.resendMark = c.durable
	for _, e := range c.tail {
		if e.Origin != 0 {
			ls.remember(e.Origin, e.ReqID)
		}
	}
	for _, id := range c.sortedPeers() {
		if ps := ls.peers[id]; ps.phase == pUpToDate {
			c.send(id, Message{Type: MsgUpToDate, Epoch: ls.epoch, Seq: ps.seq, Commit: c.commit})
		}
	}
	c.setRole(RoleLeader, c.id)
}

// startSync brings a follower whose log ends at (fi, fz) to the leader's
// history with one SYNC message: TRUNC its divergent tail and/or DIFF the
// missing entries, or a SNAP when the log cannot serve it.
func (c *Core) startSync(id uint64, ps *peerState, fz, fi uint64) {
	ls := c.ls
	snap := func(why string) {
		if !c.cfg.CanSnapshot {
			c.log.Warn("follower needs a snapshot but the state machine cannot take one", "follower", id, "why", why)
			return
		}
		c.log.Info("sending snapshot", "follower", id, "why", why)
		ps.phase = pSnapping
		c.rd.SnapshotRequests = append(c.rd.SnapshotRequests, SnapshotRequest{Peer: id, Nonce: ps.nonce})
	}
	// The SYNC must not cut anything the follower holds that is in the
	// leader's history. A leader proposes while its own write is in
	// flight, so a quorum of followers can commit entries the leader has
	// not yet made durable. Basing the SYNC at the leader's durable index
	// would then tell a follower whose log reaches above it to TRUNC
	// committed entries (it refuses and stops); nor can the SYNC carry
	// entries the leader may still lose. So the peer waits, in pInfo with
	// its ACKEPOCH remembered, until the leader's log is durable through
	// the follower's last entry, and LogDurable starts its sync. The index
	// waited for is fixed when the wait begins and is at most the leader's
	// last index, so the wait ends even under load; entries the follower
	// holds beyond the leader's whole log are not in its history, and are
	// cut then, as when nothing is in flight.
	if want := c.indexInFlightAtOrBelow(fz); want > c.durable {
		if ps.syncAwaits == 0 {
			c.log.Debug("sync waits for the leader's own log", "follower", id, "index", want, "durable", c.durable)
		}
		ps.phase, ps.syncAwaits = pInfo, want
		return
	}
	ps.syncAwaits = 0
	k, ok := c.rl.IndexAtOrBelow(fz)
	if !ok {
		snap("its last zxid is in trimmed history")
		return
	}
	// The log reader may know entries not yet durable: the SYNC carries
	// only durable ones (the wait above makes this cut nothing).
	k = min(k, c.durable)
	kz, _ := c.zxidAt(k)
	msg := Message{Type: MsgSync, Epoch: ls.epoch, Nonce: ps.nonce, Commit: c.commit, Index: k, Zxid: kz, Membership: c.syncMembership()}
	switch {
	case kz != fz && fz != 0 && ZxidEpoch(fz) == 0:
		snap("its state was restored from a backup this log does not start from")
		return
	case kz == fz && fi != k:
		snap(fmt.Sprintf("its zxid %s is at index %d here but %d there", FormatZxid(fz), k, fi))
		return
	case kz != fz && k >= fi:
		snap("its log diverges below what the leader can compare")
		return
	case kz != fz:
		msg.Flags |= FlagTrunc
	}
	if c.durable-k > uint64(c.cfg.MaxDiffEntries) {
		snap(fmt.Sprintf("%d entries behind", c.durable-k))
		return
	}
	ents, err := c.syncEntries(k)
	if err != nil {
		snap(err.Error())
		return
	}
	msg.Entries = ents
	c.sendSync(id, ps, msg)
}

// indexInFlightAtOrBelow returns the highest index of the leader's whole
// log, entries handed to the writer or still pending included, whose zxid
// is at most zxid, when that is above the durable index; otherwise the
// durable index.
func (c *Core) indexInFlightAtOrBelow(zxid uint64) uint64 {
	if c.lastIndex <= c.durable {
		return c.durable
	}
	if dz, _ := c.zxidAt(c.durable); zxid <= dz {
		return c.durable
	}
	if zxid >= c.lastZxid {
		return c.lastIndex
	}
	k := c.durable
	for _, ents := range [][]Entry{c.tail, c.pending} {
		for _, e := range ents {
			if e.Index > k && e.Zxid <= zxid {
				k = e.Index
			}
		}
	}
	return k
}

// startAwaitedSyncs starts the SYNCs that waited for the leader's own log
// to become durable (see startSync).
func (c *Core) startAwaitedSyncs() {
	ls := c.ls
	if ls == nil || !ls.currentSaved {
		return
	}
	for _, id := range c.sortedPeers() {
		ps := ls.peers[id]
		if ps.phase == pInfo && ps.epochAcked && ps.syncAwaits != 0 && ps.syncAwaits <= c.durable {
			c.startSync(id, ps, ps.ackZxid, ps.ackIndex)
		}
	}
}

func (c *Core) sendSync(id uint64, ps *peerState, msg Message) {
	c.ls.seqGen++
	ps.seq = c.ls.seqGen
	msg.Seq = ps.seq
	ps.syncMsg = &msg
	ps.phase = pSynced
	ps.acked = 0
	c.log.Debug("sync", "follower", id, "trunc", msg.Flags&FlagTrunc != 0, "snap", msg.Flags&FlagSnap != 0,
		"base", msg.Index, "entries", len(msg.Entries))
	c.send(id, msg)
}

func (c *Core) handleSnapResult(res *Snapshot) {
	ls := c.ls
	if ls == nil {
		return
	}
	ps := ls.peers[res.Peer]
	if ps == nil || ps.nonce != res.Nonce || ps.phase != pSnapping {
		return
	}
	if res.Err != nil {
		c.log.Warn("snapshot for follower failed", "follower", res.Peer, "err", res.Err)
		ps.phase = pInfo
		return
	}
	ents, err := c.syncEntries(res.Index)
	if err != nil {
		c.log.Warn("entries after snapshot unavailable", "follower", res.Peer, "err", err)
		ps.phase = pInfo
		return
	}
	c.sendSync(res.Peer, ps, Message{Type: MsgSync, Flags: FlagSnap, Epoch: ls.epoch, Nonce: ps.nonce, Commit: c.commit,
		Index: res.Index, Zxid: res.Zxid, Data: res.Data, Entries: ents, Membership: c.syncMembership()})
}

// syncEntries returns the entries a SYNC based at index k carries: those
// after k, preceded by the one at k when the log still holds it. A
// follower skips that one, but takes its Time: a log that holds no entry
// (restored from a snapshot) does not know the Time its next entry must
// not go below, and if that follower led next, its entries' Time would go
// back to its own clock.
func (c *Core) syncEntries(k uint64) ([]Entry, error) {
	if k > 0 {
		if ents, err := c.durableEntries(k, c.durable); err == nil {
			return ents, nil
		}
	}
	return c.durableEntries(k+1, c.durable)
}

// leaderAppend assigns the next zxid to a proposal and queues it for the
// next flush.
func (c *Core) leaderAppend(origin, reqID uint64, kind EntryKind, data []byte, wall int64) bool {
	ls := c.ls
	if ls.counter == math.MaxUint32 {
		// As ZooKeeper does: a new epoch needs a new election.
		c.becomeLooking("zxid counter exhausted")
		return false
	}
	ls.counter++
	c.lastIndex++
	now := max(wall, c.lastTime)
	e := Entry{Index: c.lastIndex, Zxid: MakeZxid(ls.epoch, ls.counter), Time: now, Data: data, Origin: origin, ReqID: reqID, Kind: kind}
	if kind == EntryMembership {
		if err := c.notePending(e); err != nil {
			c.fatal(err) // checked by ProposeMembership: cannot happen
			return false
		}
	}
	c.pending = append(c.pending, e)
	c.lastZxid, c.lastTime = e.Zxid, now
	return true
}

// advanceCommit commits up to the highest index a quorum of voters has on
// disk, the leader's own disk included.
func (c *Core) advanceCommit() {
	ls := c.ls
	cm, ok := c.quorumValue(func(id uint64) (uint64, bool) {
		if id == c.id {
			return c.durable, true
		}
		if ps := ls.peers[id]; ps != nil && ps.phase >= pSynced {
			return ps.acked, true
		}
		return 0, false
	})
	if !ok || cm <= c.commit {
		return
	}
	c.commit = cm
	msg := Message{Type: MsgCommit, Epoch: ls.epoch, Commit: cm}
	for _, id := range c.sortedPeers() {
		if ls.peers[id].phase >= pSynced {
			c.send(id, msg)
		}
	}
}

func (c *Core) leaderRead(rd pendingRead) {
	ls := c.ls
	rd.seq, rd.index = ls.hbSeq+1, c.commit
	ls.reads = append(ls.reads, rd)
	c.sendHeartbeats()
	c.checkReads()
}

func (c *Core) sendHeartbeats() {
	ls := c.ls
	ls.hbSeq++
	c.rd.HeartbeatRound = ls.hbSeq
	for _, id := range c.sortedPeers() {
		if ps := ls.peers[id]; ps.phase >= pSynced {
			c.send(id, Message{Type: MsgHeartbeat, Epoch: ls.epoch, Seq: ps.seq, Nonce: ls.hbSeq, Commit: c.commit})
		}
	}
}

// checkReads answers the reads whose heartbeat round a quorum answered:
// the leader still led when it took their index.
func (c *Core) checkReads() {
	ls := c.ls
	if len(ls.reads) == 0 {
		return
	}
	// Reads are not entries: both configurations confirm them in full
	// while a change is pending.
	answered := func(m *Membership) (uint64, bool) {
		return m.quorumValue(func(id uint64) (uint64, bool) {
			if id == c.id {
				return ls.hbSeq, true
			}
			if ps := ls.peers[id]; ps != nil && ps.phase >= pSynced {
				return ps.hbSeq, true
			}
			return 0, false
		})
	}
	confirmed, ok := answered(&c.conf)
	if !ok {
		return
	}
	if c.next != nil {
		nc, ok := answered(c.next)
		if !ok {
			return
		}
		confirmed = min(confirmed, nc)
	}
	keep := ls.reads[:0]
	for _, rd := range ls.reads {
		if rd.seq <= confirmed {
			c.answerRead(rd, rd.index, nil)
		} else {
			keep = append(keep, rd)
		}
	}
	ls.reads = keep
}

func (c *Core) leaderTick() {
	ls := c.ls
	if ls.phase != lBroadcast {
		if c.now >= ls.deadline {
			c.becomeLooking("no quorum synchronized in time")
		}
		return
	}
	c.sendHeartbeats()
	// Resend what a follower has not acknowledged since the last tick:
	// a PROPOSAL was lost, or arrived out of order.
	for _, id := range c.sortedPeers() {
		ps := ls.peers[id]
		if ps.phase != pUpToDate || ps.acked >= ls.resendMark {
			continue
		}
		ents, err := c.durableEntries(ps.acked+1, min(c.durable, ps.acked+maxResend))
		if err != nil {
			// It must start over (and will be sent a snapshot).
			c.log.Warn("cannot resend entries; dropping follower", "follower", id, "from", ps.acked+1, "err", err)
			delete(ls.peers, id)
			continue
		}
		c.send(id, Message{Type: MsgProposal, Epoch: ls.epoch, Entries: ents})
	}
	ls.resendMark = c.durable
	live := func(id uint64) bool {
		ps := ls.peers[id]
		return id == c.id || (ps != nil && ps.phase >= pSynced && c.now <= ps.heard+c.etTicks)
	}
	if !c.quorum(live) {
		c.becomeLooking("lost contact with a quorum")
		return
	}
	c.checkReads()
}
