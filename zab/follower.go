package zab

import (
	"errors"
	"fmt"
)

// A follower (or observer) of a leader goes through discovery (FOLLOWERINFO
// until LEADERINFO; acceptedEpoch persisted; ACKEPOCH until SYNC),
// synchronization (SYNC applied and durable, currentEpoch persisted,
// ACKNEWLEADER until UPTODATE) and then broadcast. Each phase resends its
// message every tick, so lost messages cost a tick, and each message from
// the leader names the epoch and sync session it belongs to, so duplicated
// and delayed ones are recognized and ignored.

type followerPhase int

const (
	fDiscover  followerPhase = iota // sending FOLLOWERINFO
	fAckEpoch                       // acceptedEpoch persisted, sending ACKEPOCH
	fSynced                         // SYNC applied, sending ACKNEWLEADER
	fBroadcast                      // UPTODATE received
)

type followerState struct {
	phase    followerPhase
	nonce    uint64 // this attempt to join the leader
	epoch    uint32 // the leader's new epoch, once known
	seq      uint64 // the SYNC session applied
	heard    uint64 // tick of the last message from the leader
	deadline uint64 // the tick by which broadcast must begin
}

func (r *replica) followerTick() {
	fs := r.fs
	switch fs.phase {
	case fDiscover:
		r.send(r.leader, r.followerInfo())
	case fAckEpoch:
		r.send(r.leader, r.ackEpoch())
	case fSynced:
		r.send(r.leader, Message{Type: MsgAckNewLeader, Epoch: fs.epoch, Seq: fs.seq, Index: r.durable})
	}
	switch {
	case fs.phase != fBroadcast && r.now >= fs.deadline:
		r.becomeLooking("synchronization with the leader did not finish in time")
	case fs.phase == fBroadcast && r.now > fs.heard+r.etTicks:
		r.becomeLooking("lost the leader")
	}
}

func (r *replica) ackEpoch() Message {
	return Message{Type: MsgAckEpoch, Epoch: r.fs.epoch, Nonce: r.fs.nonce, Round: uint64(r.ep.Current),
		Zxid: r.lastZxid, Index: r.durable}
}

func (r *replica) followerHandle(msg *Message) {
	fs := r.fs
	switch msg.Type {
	case MsgLeaderInfo:
		if msg.Nonce != fs.nonce {
			return
		}
		fs.heard = r.now
		if fs.phase == fAckEpoch && msg.Epoch == fs.epoch {
			r.send(r.leader, r.ackEpoch())
			return
		}
		if fs.phase != fDiscover {
			return
		}
		if msg.Epoch < r.ep.Accepted {
			r.becomeLooking(fmt.Sprintf("leader %d proposed epoch %d below the accepted epoch %d", r.leader, msg.Epoch, r.ep.Accepted))
			return
		}
		if msg.Epoch > r.ep.Accepted {
			// Persisted before ACKEPOCH: this member must never follow an
			// older epoch again, across restarts too.
			if !r.persistEpochs(epochs{Accepted: msg.Epoch, Current: r.ep.Current}) {
				return
			}
		}
		fs.epoch = msg.Epoch
		fs.phase = fAckEpoch
		r.send(r.leader, r.ackEpoch())
	case MsgSync:
		if fs.phase < fAckEpoch || msg.Epoch != fs.epoch || msg.Nonce != fs.nonce {
			return
		}
		fs.heard = r.now
		if msg.Seq <= fs.seq {
			if msg.Seq == fs.seq {
				r.send(r.leader, Message{Type: MsgAckNewLeader, Epoch: fs.epoch, Seq: fs.seq, Index: r.durable})
			}
			return
		}
		if err := r.applySync(msg); err != nil {
			if errors.Is(err, errSyncRejected) {
				r.becomeLooking(err.Error())
				return
			}
			r.fatal(err)
			return
		}
		// ZOOKEEPER-4646 order: synchronized entries are on disk (applySync
		// fsyncs), committed ones are handed to the applier, then
		// currentEpoch is persisted, and only then is NEWLEADER
		// acknowledged.
		r.commit = max(r.commit, min(msg.Commit, r.durable))
		r.dispatch()
		if fs.epoch > r.ep.Current {
			if !r.persistEpochs(epochs{Accepted: r.ep.Accepted, Current: fs.epoch}) {
				return
			}
		}
		fs.seq = msg.Seq
		fs.phase = fSynced
		r.send(r.leader, Message{Type: MsgAckNewLeader, Epoch: fs.epoch, Seq: fs.seq, Index: r.durable})
	case MsgUpToDate:
		if fs.phase != fSynced || msg.Epoch != fs.epoch || msg.Seq != fs.seq {
			return
		}
		fs.heard = r.now
		fs.phase = fBroadcast
		r.commit = max(r.commit, msg.Commit)
		role := RoleFollower
		if !r.voter {
			role = RoleObserver
		}
		r.setRole(role, r.leader)
	case MsgProposal:
		if fs.phase < fSynced || msg.Epoch != fs.epoch {
			return
		}
		fs.heard = r.now
		r.followerAppend(msg.Entries)
	case MsgCommit:
		if fs.phase < fSynced || msg.Epoch != fs.epoch {
			return
		}
		fs.heard = r.now
		r.commit = max(r.commit, msg.Commit)
	case MsgHeartbeat:
		if fs.phase < fSynced || msg.Epoch != fs.epoch {
			return
		}
		fs.heard = r.now
		r.commit = max(r.commit, msg.Commit)
		if msg.Seq == fs.seq {
			r.send(r.leader, Message{Type: MsgHeartbeatAck, Epoch: fs.epoch, Seq: fs.seq, Nonce: msg.Nonce, Index: r.durable})
		}
	case MsgRequestFail:
		if p := r.takeWaiter(msg.ReqID); p != nil {
			p.finish(nil, ErrNoLeader)
		}
	case MsgReadIndexResp, MsgCallResp:
		w := r.rpcs[msg.Nonce]
		if w == nil {
			return
		}
		delete(r.rpcs, msg.Nonce)
		res := rpcResult{index: msg.Index, data: msg.Data}
		if msg.Err != "" {
			res.err = remoteError(msg.Err)
		}
		w.done <- res
	}
}

// remoteError turns an error text from the leader back into an error,
// recognizing zab's own sentinels.
func remoteError(text string) error {
	for _, e := range []error{ErrNoLeader, ErrLeaderChanged} {
		if text == e.Error() {
			return e
		}
	}
	return errors.New(text)
}

var errSyncRejected = errors.New("zab: synchronization rejected")

// applySync applies a SYNC: restore a snapshot or truncate, then append
// the leader's entries, durably.
func (r *replica) applySync(msg *Message) error {
	// The log is changed here, on the loop: nothing may be in the writer's
	// hands meanwhile.
	if !r.drainLog() {
		return ErrStopped
	}
	switch {
	case msg.Flags&FlagSnap != 0:
		if applied := r.m.appliedIndex.Load(); msg.Index < applied {
			return fmt.Errorf("%w: snapshot at index %d is behind the applied index %d", errSyncRejected, msg.Index, applied)
		}
		done := make(chan error, 1)
		r.apply.push(applyItem{restore: &restoreRequest{index: msg.Index, zxid: msg.Zxid, data: msg.Data, done: done}})
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("install snapshot at index %d: %w", msg.Index, err)
			}
		case <-r.m.stopCh:
			return ErrStopped
		}
		// The state is durable at the snapshot: only now may the log forget
		// what came before it.
		if err := r.wal.resetAt(logBase{index: msg.Index, zxid: msg.Zxid}); err != nil {
			return fmt.Errorf("restart log after snapshot %d: %w", msg.Index, err)
		}
		r.tail, r.pending = nil, nil
		r.lastIndex, r.lastZxid = msg.Index, msg.Zxid
		r.logChanged(msg.Index)
		r.dispatched, r.commit = msg.Index, max(r.commit, msg.Index)
		r.log.Info("installed snapshot", "id", r.id, "index", msg.Index, "zxid", FormatZxid(msg.Zxid), "bytes", len(msg.Data))
	case msg.Flags&FlagTrunc != 0:
		if msg.Index < r.dispatched {
			return fmt.Errorf("leader %d asks to truncate after index %d, below the committed index %d: histories diverge",
				r.leader, msg.Index, r.dispatched)
		}
		if err := r.wal.truncateAfter(msg.Index); err != nil {
			return fmt.Errorf("truncate log after index %d: %w", msg.Index, err)
		}
		if len(r.tail) > 0 && r.tail[0].Index <= msg.Index {
			r.tail = r.tail[:msg.Index-r.tail[0].Index+1]
		} else {
			r.tail = nil
		}
		r.log.Info("truncated divergent log tail", "id", r.id, "after", msg.Index, "dropped", r.durable-msg.Index)
		r.lastIndex, r.lastZxid, r.lastTime = msg.Index, r.wal.lastZxid, r.wal.lastTime
		r.logChanged(msg.Index)
	}
	if r.durable != msg.Index {
		return fmt.Errorf("%w: leader diffs from index %d, log ends at %d", errSyncRejected, msg.Index, r.durable)
	}
	if len(msg.Entries) > 0 {
		if !r.followerAppend(msg.Entries) {
			return fmt.Errorf("%w: entries do not continue the log", errSyncRejected)
		}
		if err := r.wal.append(r.pending); err != nil {
			return fmt.Errorf("append synchronized entries: %w", err)
		}
		r.tail = append(r.tail, r.pending...)
		r.logChanged(r.pending[len(r.pending)-1].Index)
		r.pending = nil
	}
	return nil
}

// followerAppend queues the entries from the leader that continue the log
// (skipping ones it already has); the next flush hands them to the log
// writer, and they are acknowledged once it reports them durable. It
// reports false if the entries skip ahead of the log (an earlier message
// was lost or is late; the leader resends).
func (r *replica) followerAppend(ents []Entry) bool {
	for _, e := range ents {
		if e.Index <= r.lastIndex {
			continue
		}
		if e.Index != r.lastIndex+1 || e.Zxid <= r.lastZxid {
			return false
		}
		r.pending = append(r.pending, e)
		r.lastIndex, r.lastZxid, r.lastTime = e.Index, e.Zxid, e.Time
	}
	return true
}
