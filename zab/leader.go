package zab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
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
	observer bool
	nonce    uint64
	accepted uint32
	phase    peerPhase
	seq      uint64
	syncMsg  *Message // resent while the follower repeats ACKEPOCH
	acked    uint64   // durable on the follower, under seq
	hbSeq    uint64   // highest heartbeat round it answered
	heard    uint64
}

type pendingRead struct {
	seq   uint64
	index uint64
	reply func(uint64, error)
}

type leaderState struct {
	phase        leaderPhase
	epoch        uint32 // the new epoch, 0 until chosen
	peers        map[uint64]*peerState
	ackedEpoch   map[uint64]bool
	deadline     uint64
	counter      uint32
	hbSeq        uint64
	hbSentAt     time.Time // when round hbSeq went out, for PeerRoundTrip
	reads        []pendingRead
	seqGen       uint64
	resendMark   uint64
	seen         map[[2]uint64]struct{}
	seenOrder    [][2]uint64
	currentSaved bool
}

const maxSeenRequests = 1 << 16

func (ls *leaderState) failReads(err error) {
	for _, rd := range ls.reads {
		rd.reply(0, err)
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

func (r *replica) becomeLeader() {
	r.leaveRole("leading")
	r.leader = r.id
	r.ls = &leaderState{
		peers:      map[uint64]*peerState{},
		ackedEpoch: map[uint64]bool{},
		deadline:   r.now + r.randomTicks(),
		seen:       map[[2]uint64]struct{}{},
	}
	r.log.Info("zab elected; discovering", "id", r.id, "last_zxid", FormatZxid(r.lastZxid))
	r.checkDiscovery()
}

func (r *replica) leaderHandle(from uint64, msg *Message) {
	ls := r.ls
	ps := ls.peers[from]
	switch msg.Type {
	case MsgFollowerInfo:
		observer := msg.Flags&FlagObserver != 0
		if observer == r.isVoter(from) {
			return // not what the configuration says it is
		}
		if ps == nil || ps.nonce != msg.Nonce {
			ps = &peerState{nonce: msg.Nonce, observer: observer, accepted: msg.Epoch}
			ls.peers[from] = ps
		}
		ps.heard = r.now
		if ls.epoch == 0 {
			r.checkDiscovery()
			return
		}
		if ps.phase == pNone {
			ps.phase = pInfo
		}
		r.send(from, Message{Type: MsgLeaderInfo, Epoch: ls.epoch, Nonce: ps.nonce})
	case MsgAckEpoch:
		if ps == nil || msg.Nonce != ps.nonce || msg.Epoch != ls.epoch || ls.epoch == 0 {
			return
		}
		ps.heard = r.now
		switch {
		case ps.phase == pInfo:
			if !ps.observer {
				fv := vote{epoch: uint32(msg.Round), zxid: msg.Zxid}
				if fv.better(vote{epoch: r.ep.Current, zxid: r.lastZxid}) {
					r.becomeLooking(fmt.Sprintf("follower %d has a later history (epoch %d, zxid %s)", from, fv.epoch, FormatZxid(fv.zxid)))
					return
				}
				ls.ackedEpoch[from] = true
			}
			r.startSync(from, ps, msg.Zxid, msg.Index)
			r.checkEpochQuorum()
		case ps.phase >= pSynced && ps.syncMsg != nil:
			r.send(from, *ps.syncMsg)
		}
	case MsgAckNewLeader:
		if ps == nil || msg.Epoch != ls.epoch || msg.Seq != ps.seq || ps.phase < pSynced {
			return
		}
		ps.heard = r.now
		ps.acked = max(ps.acked, msg.Index)
		ps.syncMsg = nil
		ps.phase = pUpToDate
		if ls.phase == lBroadcast {
			r.send(from, Message{Type: MsgUpToDate, Epoch: ls.epoch, Seq: ps.seq, Commit: r.commit})
		} else {
			r.checkNewLeaderQuorum()
		}
	case MsgAck:
		if ps == nil || msg.Epoch != ls.epoch || msg.Seq != ps.seq || ps.phase < pSynced {
			return
		}
		ps.heard = r.now
		ps.acked = max(ps.acked, msg.Index)
	case MsgHeartbeatAck:
		if ps == nil || msg.Epoch != ls.epoch || msg.Seq != ps.seq || ps.phase < pSynced {
			return
		}
		ps.heard = r.now
		ps.acked = max(ps.acked, msg.Index)
		if msg.Nonce == ls.hbSeq && ps.hbSeq < msg.Nonce {
			r.cfg.Observer.PeerRoundTrip(from, time.Since(ls.hbSentAt))
		}
		ps.hbSeq = max(ps.hbSeq, msg.Nonce)
		r.checkReads()
	case MsgRequest:
		if ls.phase != lBroadcast || msg.Epoch != ls.epoch {
			r.send(from, Message{Type: MsgRequestFail, ReqID: msg.ReqID, Err: ErrNoLeader.Error()})
			return
		}
		if !ls.remember(msg.Origin, msg.ReqID) {
			return // a duplicate of a request already proposed
		}
		if !r.leaderAppend(msg.Origin, msg.ReqID, msg.Data) {
			r.send(from, Message{Type: MsgRequestFail, ReqID: msg.ReqID, Err: ErrNoLeader.Error()})
		}
	case MsgReadIndex:
		if ls.phase != lBroadcast {
			r.send(from, Message{Type: MsgReadIndexResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
			return
		}
		nonce := msg.Nonce
		r.leaderRead(func(index uint64, err error) {
			resp := Message{Type: MsgReadIndexResp, Nonce: nonce, Index: index}
			if err != nil {
				resp.Err = err.Error()
			}
			r.send(from, resp)
		})
	case MsgCall:
		if ls.phase != lBroadcast {
			r.send(from, Message{Type: MsgCallResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
			return
		}
		r.serveCall(from, msg.Nonce, msg.Data)
	}
}

// serveCall runs the leader handler for a follower's CallLeader on its own
// goroutine, owned by the member (it ends when the member stops).
func (r *replica) serveCall(from, nonce uint64, payload []byte) {
	m := r.m
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 4*r.cfg.ElectionTimeout)
		defer cancel()
		go func() {
			select {
			case <-m.stopCh:
				cancel()
			case <-ctx.Done():
			}
		}()
		out, err := m.callLocal(ctx, payload)
		resp := Message{Type: MsgCallResp, Nonce: nonce, Data: out}
		if err != nil {
			resp.Err = err.Error()
		}
		r.send(from, resp)
	}()
}

// checkDiscovery chooses the new epoch once a quorum of voters (the leader
// included) has sent FOLLOWERINFO.
func (r *replica) checkDiscovery() {
	ls := r.ls
	if ls.epoch != 0 {
		return
	}
	n := 1
	maxAccepted := max(r.ep.Accepted, r.ep.Current)
	for _, ps := range ls.peers {
		if !ps.observer {
			n++
		}
		maxAccepted = max(maxAccepted, ps.accepted)
	}
	if n < r.quorum {
		return
	}
	if maxAccepted == math.MaxUint32 {
		r.fatal(fmt.Errorf("epoch space exhausted"))
		return
	}
	newEpoch := maxAccepted + 1
	// Persisted before it is announced.
	if !r.persistEpochs(epochs{Accepted: newEpoch, Current: r.ep.Current}) {
		return
	}
	ls.epoch = newEpoch
	ls.ackedEpoch[r.id] = true
	r.log.Info("zab new epoch", "id", r.id, "epoch", newEpoch)
	for id, ps := range ls.peers {
		ps.phase = pInfo
		r.send(id, Message{Type: MsgLeaderInfo, Epoch: newEpoch, Nonce: ps.nonce})
	}
	r.checkEpochQuorum()
}

func (r *replica) checkEpochQuorum() {
	ls := r.ls
	if ls == nil || ls.currentSaved || len(ls.ackedEpoch) < r.quorum {
		return
	}
	if !r.persistEpochs(epochs{Accepted: r.ep.Accepted, Current: ls.epoch}) {
		return
	}
	ls.currentSaved = true
	ls.phase = lSync
	r.checkNewLeaderQuorum()
}

func (r *replica) checkNewLeaderQuorum() {
	ls := r.ls
	if ls.phase != lSync {
		return
	}
	n := 1
	for _, ps := range ls.peers {
		if !ps.observer && ps.phase == pUpToDate {
			n++
		}
	}
	if n < r.quorum {
		return
	}
	// A quorum holds the leader's whole log and the new epoch: all of it is
	// committed.
	ls.phase = lBroadcast
	r.commit = max(r.commit, r.durable)
	ls.resendMark = r.durable
	for _, e := range r.tail {
		if e.Origin != 0 {
			ls.remember(e.Origin, e.ReqID)
		}
	}
	for id, ps := range ls.peers {
		if ps.phase == pUpToDate {
			r.send(id, Message{Type: MsgUpToDate, Epoch: ls.epoch, Seq: ps.seq, Commit: r.commit})
		}
	}
	r.setRole(RoleLeader, r.id)
}

// startSync brings a follower whose log ends at (fi, fz) to the leader's
// history with one SYNC message: TRUNC its divergent tail and/or DIFF the
// missing entries, or a SNAP when the log cannot serve it.
func (r *replica) startSync(id uint64, ps *peerState, fz, fi uint64) {
	ls := r.ls
	snap := func(why string) {
		if _, ok := r.sm.(Snapshotter); !ok {
			r.log.Warn("follower needs a snapshot but the state machine cannot take one", "follower", id, "why", why)
			return
		}
		r.log.Info("sending snapshot", "follower", id, "why", why)
		ps.phase = pSnapping
		r.apply.push(applyItem{snap: &snapRequest{peer: id, nonce: ps.nonce}})
	}
	k, ok := r.wal.indexAtOrBelow(fz)
	if !ok {
		snap("its last zxid is in trimmed history")
		return
	}
	k = min(k, r.durable)
	kz, _ := r.wal.zxidAt(k)
	msg := Message{Type: MsgSync, Epoch: ls.epoch, Nonce: ps.nonce, Commit: r.commit, Index: k, Zxid: kz}
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
	if r.durable-k > uint64(r.cfg.MaxDiffEntries) {
		snap(fmt.Sprintf("%d entries behind", r.durable-k))
		return
	}
	ents, err := r.durableEntries(k+1, r.durable)
	if err != nil {
		snap(err.Error())
		return
	}
	msg.Entries = ents
	r.sendSync(id, ps, msg)
}

func (r *replica) sendSync(id uint64, ps *peerState, msg Message) {
	r.ls.seqGen++
	ps.seq = r.ls.seqGen
	msg.Seq = ps.seq
	ps.syncMsg = &msg
	ps.phase = pSynced
	ps.acked = 0
	r.log.Debug("sync", "follower", id, "trunc", msg.Flags&FlagTrunc != 0, "snap", msg.Flags&FlagSnap != 0,
		"base", msg.Index, "entries", len(msg.Entries))
	r.send(id, msg)
}

func (r *replica) handleSnapResult(res *snapResult) {
	ls := r.ls
	if ls == nil {
		return
	}
	ps := ls.peers[res.peer]
	if ps == nil || ps.nonce != res.nonce || ps.phase != pSnapping {
		return
	}
	if res.err != nil {
		r.log.Warn("snapshot for follower failed", "follower", res.peer, "err", res.err)
		ps.phase = pInfo
		return
	}
	ents, err := r.durableEntries(res.index+1, r.durable)
	if err != nil {
		r.log.Warn("entries after snapshot unavailable", "follower", res.peer, "err", err)
		ps.phase = pInfo
		return
	}
	r.sendSync(res.peer, ps, Message{Type: MsgSync, Flags: FlagSnap, Epoch: ls.epoch, Nonce: ps.nonce, Commit: r.commit,
		Index: res.index, Zxid: res.zxid, Data: res.data, Entries: ents})
}

// leaderAppend assigns the next zxid to a proposal and queues it for the
// next flush.
func (r *replica) leaderAppend(origin, reqID uint64, data []byte) bool {
	ls := r.ls
	if ls.counter == math.MaxUint32 {
		// As ZooKeeper does: a new epoch needs a new election.
		r.becomeLooking("zxid counter exhausted")
		return false
	}
	ls.counter++
	r.lastIndex++
	now := max(r.cfg.Clock().UnixMilli(), r.lastTime)
	e := Entry{Index: r.lastIndex, Zxid: MakeZxid(ls.epoch, ls.counter), Time: now, Data: data, Origin: origin, ReqID: reqID}
	r.pending = append(r.pending, e)
	r.lastZxid, r.lastTime = e.Zxid, now
	return true
}

// advanceCommit commits up to the highest index a quorum of voters has on
// disk, the leader's own disk included.
func (r *replica) advanceCommit() {
	ls := r.ls
	acks := []uint64{r.durable}
	for _, ps := range ls.peers {
		if !ps.observer && ps.phase >= pSynced {
			acks = append(acks, ps.acked)
		}
	}
	if len(acks) < r.quorum {
		return
	}
	slices.Sort(acks)
	c := acks[len(acks)-r.quorum]
	if c <= r.commit {
		return
	}
	r.commit = c
	msg := Message{Type: MsgCommit, Epoch: ls.epoch, Commit: c}
	for id, ps := range ls.peers {
		if ps.phase >= pSynced {
			r.send(id, msg)
		}
	}
}

func (r *replica) leaderRead(reply func(uint64, error)) {
	ls := r.ls
	ls.reads = append(ls.reads, pendingRead{seq: ls.hbSeq + 1, index: r.commit, reply: reply})
	r.sendHeartbeats()
	r.checkReads()
}

func (r *replica) sendHeartbeats() {
	ls := r.ls
	ls.hbSeq++
	ls.hbSentAt = time.Now()
	for id, ps := range ls.peers {
		if ps.phase >= pSynced {
			r.send(id, Message{Type: MsgHeartbeat, Epoch: ls.epoch, Seq: ps.seq, Nonce: ls.hbSeq, Commit: r.commit})
		}
	}
}

// checkReads answers the reads whose heartbeat round a quorum answered:
// the leader still led when it took their index.
func (r *replica) checkReads() {
	ls := r.ls
	if len(ls.reads) == 0 {
		return
	}
	seqs := []uint64{ls.hbSeq}
	for _, ps := range ls.peers {
		if !ps.observer && ps.phase >= pSynced {
			seqs = append(seqs, ps.hbSeq)
		}
	}
	if len(seqs) < r.quorum {
		return
	}
	slices.Sort(seqs)
	confirmed := seqs[len(seqs)-r.quorum]
	keep := ls.reads[:0]
	for _, rd := range ls.reads {
		if rd.seq <= confirmed {
			rd.reply(rd.index, nil)
		} else {
			keep = append(keep, rd)
		}
	}
	ls.reads = keep
}

func (r *replica) leaderTick() {
	ls := r.ls
	if ls.phase != lBroadcast {
		if r.now >= ls.deadline {
			r.becomeLooking("no quorum synchronized in time")
		}
		return
	}
	r.sendHeartbeats()
	// Resend what a follower has not acknowledged since the last tick:
	// a PROPOSAL was lost, or arrived out of order.
	for id, ps := range ls.peers {
		if ps.phase != pUpToDate || ps.acked >= ls.resendMark {
			continue
		}
		ents, err := r.durableEntries(ps.acked+1, min(r.durable, ps.acked+maxResend))
		if err != nil {
			// It must start over (and will be sent a snapshot).
			r.log.Warn("cannot resend entries; dropping follower", "follower", id, "from", ps.acked+1, "err", err)
			delete(ls.peers, id)
			continue
		}
		r.send(id, Message{Type: MsgProposal, Epoch: ls.epoch, Entries: ents})
	}
	ls.resendMark = r.durable
	n := 1
	for _, ps := range ls.peers {
		if !ps.observer && ps.phase >= pSynced && r.now <= ps.heard+r.etTicks {
			n++
		}
	}
	if n < r.quorum {
		r.becomeLooking("lost contact with a quorum")
		return
	}
	r.checkReads()
}
