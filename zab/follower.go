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

func (c *Core) followerTick() {
	fs := c.fs
	switch fs.phase {
	case fDiscover:
		c.send(c.leader, c.followerInfo())
	case fAckEpoch:
		c.send(c.leader, c.ackEpoch())
	case fSynced:
		c.send(c.leader, Message{Type: MsgAckNewLeader, Epoch: fs.epoch, Seq: fs.seq, Index: c.durable})
	}
	switch {
	case fs.phase != fBroadcast && c.now >= fs.deadline:
		c.becomeLooking("synchronization with the leader did not finish in time")
	case fs.phase == fBroadcast && c.now > fs.heard+c.etTicks:
		c.becomeLooking("lost the leader")
	}
}

func (c *Core) ackEpoch() Message {
	return Message{Type: MsgAckEpoch, Epoch: c.fs.epoch, Nonce: c.fs.nonce, Round: uint64(c.ep.Current),
		Zxid: c.lastZxid, Index: c.durable}
}

func (c *Core) followerHandle(msg *Message) {
	fs := c.fs
	switch msg.Type {
	case MsgLeaderInfo:
		if msg.Nonce != fs.nonce {
			return
		}
		fs.heard = c.now
		if fs.phase == fAckEpoch && msg.Epoch == fs.epoch {
			c.send(c.leader, c.ackEpoch())
			return
		}
		if fs.phase != fDiscover {
			return
		}
		if msg.Epoch < c.ep.Accepted {
			c.becomeLooking(fmt.Sprintf("leader %d proposed epoch %d below the accepted epoch %d", c.leader, msg.Epoch, c.ep.Accepted))
			return
		}
		if msg.Epoch > c.ep.Accepted {
			// Persisted before ACKEPOCH: this member must never follow an
			// older epoch again, across restarts too.
			c.persistEpochs(Epochs{Accepted: msg.Epoch, Current: c.ep.Current})
		}
		fs.epoch = msg.Epoch
		fs.phase = fAckEpoch
		c.send(c.leader, c.ackEpoch())
	case MsgSync:
		if fs.phase < fAckEpoch || msg.Epoch != fs.epoch || msg.Nonce != fs.nonce {
			return
		}
		fs.heard = c.now
		if msg.Seq <= fs.seq {
			if msg.Seq == fs.seq {
				c.send(c.leader, Message{Type: MsgAckNewLeader, Epoch: fs.epoch, Seq: fs.seq, Index: c.durable})
			}
			return
		}
		if err := c.applySync(msg); err != nil {
			if errors.Is(err, errSyncRejected) {
				c.becomeLooking(err.Error())
				return
			}
			c.fatal(err)
			return
		}
		// ZOOKEEPER-4646 order, carried by the Ready: synchronized entries
		// are on disk (its Sync), committed ones are handed to the applier
		// (its Committed), then currentEpoch is persisted (its Epochs), and
		// only then is NEWLEADER acknowledged (its Messages).
		c.commit = max(c.commit, min(msg.Commit, c.durable))
		c.dispatch()
		if fs.epoch > c.ep.Current {
			c.persistEpochs(Epochs{Accepted: c.ep.Accepted, Current: fs.epoch})
		}
		fs.seq = msg.Seq
		fs.phase = fSynced
		c.send(c.leader, Message{Type: MsgAckNewLeader, Epoch: fs.epoch, Seq: fs.seq, Index: c.durable})
	case MsgUpToDate:
		if fs.phase != fSynced || msg.Epoch != fs.epoch || msg.Seq != fs.seq {
			return
		}
		fs.heard = c.now
		fs.phase = fBroadcast
		c.commit = max(c.commit, msg.Commit)
		role := RoleFollower
		if !c.conf.IsVoter(c.id) {
			role = RoleObserver
		}
		c.setRole(role, c.leader)
	case MsgProposal:
		if fs.phase < fSynced || msg.Epoch != fs.epoch {
			return
		}
		fs.heard = c.now
		c.followerAppend(msg.Entries)
	case MsgCommit:
		if fs.phase < fSynced || msg.Epoch != fs.epoch {
			return
		}
		fs.heard = c.now
		c.commit = max(c.commit, msg.Commit)
	case MsgHeartbeat:
		if fs.phase < fSynced || msg.Epoch != fs.epoch {
			return
		}
		fs.heard = c.now
		c.commit = max(c.commit, msg.Commit)
		if msg.Seq == fs.seq {
			c.send(c.leader, Message{Type: MsgHeartbeatAck, Epoch: fs.epoch, Seq: fs.seq, Nonce: msg.Nonce, Index: c.durable})
		}
	case MsgTransfer:
		c.handleTransfer(msg)
	case MsgRequestFail:
		c.refuse(msg.ReqID, remoteError(msg.Err))
	case MsgReadIndexResp, MsgCallResp:
		w := c.rpcs[msg.Nonce]
		if w == nil {
			return
		}
		delete(c.rpcs, msg.Nonce)
		a := Answer{ID: w.id, Index: msg.Index, Data: msg.Data}
		if msg.Err != "" {
			a.Err = remoteError(msg.Err)
		}
		c.answer(a)
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

// applySync takes a SYNC: it checks that the synchronization continues
// this member's log, then takes the log it describes as its own and puts
// the install in the Ready (Sync), which the driver makes durable before
// this Ready's messages go out.
func (c *Core) applySync(msg *Message) error {
	// The log changes under the Sync: nothing may be in the writer's
	// hands meanwhile.
	c.drainLog()
	base, baseZxid := c.durable, c.lastZxid
	in := &SyncInstall{}
	switch {
	case msg.Flags&FlagSnap != 0:
		if msg.Index < c.dispatched {
			return fmt.Errorf("%w: snapshot at index %d is behind the applied index %d", errSyncRejected, msg.Index, c.dispatched)
		}
		in.Snapshot = &SnapshotData{Index: msg.Index, Zxid: msg.Zxid, Data: msg.Data}
		base, baseZxid = msg.Index, msg.Zxid
	case msg.Flags&FlagTrunc != 0:
		if msg.Index < c.dispatched {
			return fmt.Errorf("leader %d asks to truncate after index %d, below the committed index %d: histories diverge",
				c.leader, msg.Index, c.dispatched)
		}
		z, ok := c.zxidAt(msg.Index)
		if msg.Index > c.durable || !ok {
			return fmt.Errorf("%w: leader asks to truncate after index %d, log ends at %d", errSyncRejected, msg.Index, c.durable)
		}
		in.Truncate, in.TruncateAfter = true, msg.Index
		base, baseZxid = msg.Index, z
	}
	if base != msg.Index {
		return fmt.Errorf("%w: leader diffs from index %d, log ends at %d", errSyncRejected, msg.Index, base)
	}
	last, lastZxid, lastTime := base, baseZxid, c.lastTime
	for _, e := range msg.Entries {
		if e.Index <= last {
			if e.Index == base && e.Zxid == baseZxid {
				// The entry at the base (see syncEntries): its Time is a
				// floor for the next entry's.
				lastTime = max(lastTime, e.Time)
			}
			continue
		}
		if e.Index != last+1 || e.Zxid <= lastZxid {
			return fmt.Errorf("%w: entries do not continue the log", errSyncRejected)
		}
		in.Entries = append(in.Entries, e)
		last, lastZxid, lastTime = e.Index, e.Zxid, max(lastTime, e.Time)
	}
	switch {
	case in.Snapshot != nil:
		// The snapshot replaces the whole log: a pending configuration in
		// it is gone, and the leader's active one is found in the SYNC.
		c.dropPendingAbove(0)
		c.tail = nil
		c.dispatched, c.commit = msg.Index, max(c.commit, msg.Index)
		c.log.Info("installing snapshot", "id", c.id, "index", msg.Index, "zxid", FormatZxid(msg.Zxid), "bytes", len(msg.Data))
	case in.Truncate:
		if len(c.tail) > 0 && c.tail[0].Index <= msg.Index {
			c.tail = c.tail[:msg.Index-c.tail[0].Index+1]
		} else {
			c.tail = nil
		}
		c.log.Info("truncating divergent log tail", "id", c.id, "after", msg.Index, "dropped", c.durable-msg.Index)
		c.dropPendingAbove(msg.Index)
	}
	// The leader's active configuration is committed: it is adopted as
	// such wherever its entry is (as from a notification). Usually the
	// entry is at or below base, but a leader whose own write lags SYNCs
	// only through its durable index, which a quorum of followers may
	// have committed past, configuration entry included. Left out, a
	// joining member would keep its starting configuration, which names
	// it, take itself for joined (see joined), and later, learning the
	// leader's configuration that does not name it yet, for removed.
	if m := msg.Membership; m != nil {
		c.adoptCommitted(m)
	}
	for _, e := range in.Entries {
		if e.Kind == EntryMembership {
			if err := c.notePending(e); err != nil {
				return err
			}
		}
	}
	c.tail = append(c.tail, in.Entries...)
	c.lastIndex, c.lastZxid, c.lastTime = last, lastZxid, lastTime
	c.joined()
	c.written, c.durable = last, last
	c.rd.Sync = in
	c.urgent = true
	return nil
}

// followerAppend queues the entries from the leader that continue the log
// (skipping ones it already has); the next Ready hands them to the log
// writer, and they are acknowledged once it reports them durable. It
// reports false if the entries skip ahead of the log (an earlier message
// was lost or is late; the leader resends).
func (c *Core) followerAppend(ents []Entry) bool {
	for _, e := range ents {
		if e.Index <= c.lastIndex {
			continue
		}
		if e.Index != c.lastIndex+1 || e.Zxid <= c.lastZxid {
			return false
		}
		if e.Kind == EntryMembership {
			if err := c.notePending(e); err != nil {
				c.fatal(err)
				return false
			}
		}
		c.pending = append(c.pending, e)
		c.lastIndex, c.lastZxid, c.lastTime = e.Index, e.Zxid, e.Time
	}
	return true
}
