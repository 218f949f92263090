package zabsim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/januskv/janus/zab"
)

// Simulated latencies, in virtual milliseconds.
const (
	maxFsync = 60 // the slowest disk's fdatasync
	// slowFsync is the slowest fdatasync of the one lagging disk some runs
	// have (see newSim): longer than an election timeout, as a leader's
	// 2 s fdatasync was seen in a process test.
	slowFsync     = 2000
	maxApplyDelay = 10 // until the applier takes its queue
	electionTicks = 10 // the default 1 s election timeout over a 100 ms tick
	maxDiff       = 64 // entries a DIFF may carry; more behind gets a SNAP
	wallClockBase = 1_700_000_000_000
)

// node is one member: its disk, which survives crashes, and the
// incarnation running on it, which does not. It is the simulator's
// driver of a zab.Core and carries out every Ready in the order Ready's
// contract gives (except where a test sabotages it).
type node struct {
	s           *sim
	id          uint64
	disk        *disk
	tickPeriod  int64
	clockOffset int64
	fsyncMax    int64  // this disk's slowest fdatasync
	rolls       uint64 // draws at rolledAt from its own random stream
	rolledAt    int64
	reqSeq      uint64 // survives restarts, as the real member's random start does
	// joined says the member was started at least once: one of the
	// starting ensemble, or a spare a membership change added. startConf
	// is the configuration it starts from until it persists one (the
	// starting ensemble's, or the change that added it), as --peers is.
	joined    bool
	startConf zab.Membership
	// spare is a member outside the starting ensemble: it starts as a
	// real member added by a change does (--initial-cluster-state
	// existing), joining, until its first SYNC.
	spare bool

	// The incarnation.
	up    bool
	inc   int
	core  *zab.Core
	role  zab.Role
	epoch uint32
	// applyQ is the applier's queue; applyAt says an applier step is
	// scheduled.
	applyQ  []applyItem
	applyAt bool
	// readyAt says a Ready is due (inputs are being gathered).
	readyAt bool
	// fsyncGen names the group write in flight, so that a stale fsync
	// completion (the group was drained meanwhile) is ignored.
	fsyncGen uint64
	// waiters are this incarnation's proposals still waiting for their
	// entry, by ReqID; dispatched ones are with the applier.
	waiters map[uint64]*waiter
	// reads are this incarnation's ReadIndex requests, by ID, each with
	// the highest index applied anywhere when it was asked.
	reads   map[uint64]uint64
	readSeq uint64
	// transfers are this incarnation's leader transfers not yet
	// answered, by ReqID.
	transfers map[uint64]transferReq
	// cutTo says this step cut the log (after checking the cut).
	cutTo bool
	// lateEpochs are epochs a SabotageLateEpochs driver has not yet
	// persisted.
	lateEpochs *zab.Epochs
}

type waiter struct {
	probe      bool
	dispatched bool
}

type applyItem struct {
	entries []zab.Entry
	snap    *zab.SnapshotRequest
}

// logReader serves the Core's reads from the simulated disk.
type logReader struct{ d *disk }

func (r logReader) Entries(from, to uint64) ([]zab.Entry, error) { return r.d.entries(from, to) }
func (r logReader) ZxidAt(index uint64) (uint64, bool)           { return r.d.zxidAt(index) }
func (r logReader) IndexAtOrBelow(zxid uint64) (uint64, bool)    { return r.d.indexAtOrBelow(zxid) }
func (r logReader) FirstIndex() uint64 {
	if r.d.lastIndex() == r.d.base.index {
		return 0
	}
	return r.d.base.index + 1
}

// start opens the member from its disk, as zab.Open does: the log
// resumes (or restarts at the state machine's index when the state
// machine is ahead of it), and the entries above the applied index wait
// in memory for a leader to say they are committed.
func (n *node) start() {
	d := n.disk
	applied := d.sm.index
	if applied < d.base.index {
		n.s.fail(n.s.chk.fail(n.id, "state machine at %d below the log's base %d", applied, d.base.index))
		return
	}
	if applied > d.lastIndex() {
		// The state came from elsewhere (a snapshot the log never held).
		var removed []zab.Entry
		if d.lastIndex() > d.base.index {
			removed, _ = d.entries(d.base.index+1, d.lastIndex())
		}
		n.s.fail(n.s.chk.cut(n.id, removed))
		d.resetAt(restoredBase(applied))
		n.cutTo = true
	}
	unapplied, err := d.entries(applied+1, d.lastIndex())
	if err != nil {
		n.s.fail(n.s.chk.fail(n.id, "reopen: %v", err))
		return
	}
	// A log that holds no entry (new, or restarted at a snapshot) knows no
	// Time, as the real log does not.
	lastTime := int64(0)
	if e, ok := d.entry(d.lastIndex()); ok {
		lastTime = e.Time
	}
	n.inc++
	core, err := zab.NewCore(zab.CoreConfig{
		ID: n.id, Voters: n.startConf.Voters, Observers: n.startConf.Observers, Membership: d.membership,
		Join:          n.spare,
		ElectionTicks: electionTicks, MaxDiffEntries: maxDiff, CanSnapshot: true,
		Seed:      [2]uint64{n.s.trace.Seed, n.id<<32 | uint64(n.inc)},
		Log:       logReader{d},
		Epochs:    zab.Epochs{Accepted: d.accepted, Current: d.current},
		LastIndex: d.lastIndex(), LastZxid: d.durableZxid(), LastTime: lastTime,
		Applied: applied, Unapplied: unapplied,
	})
	if err != nil {
		n.s.fail(n.s.chk.fail(n.id, "NewCore: %v", err))
		return
	}
	n.up, n.core, n.role, n.epoch = true, core, zab.RoleLooking, d.current
	n.applyQ, n.applyAt, n.readyAt, n.waiters, n.lateEpochs = nil, false, false, map[uint64]*waiter{}, nil
	n.reads = map[uint64]uint64{}
	n.transfers = map[uint64]transferReq{}
	n.fsyncGen++
	n.s.ag.push(&item{at: n.s.now + 1 + n.dice().Int64N(n.tickPeriod), kind: evTick, to: n.id, inc: n.inc})
	n.ready()
}

// dice draws this member's next latency: from its own stream and the
// time, so that what other members do, and what happened before, change
// it as little as possible.
func (n *node) dice() *rand.Rand {
	if n.rolledAt != n.s.now {
		n.rolls, n.rolledAt = 0, n.s.now
	}
	n.rolls++
	return dice(n.s.trace.Seed, 1<<63|n.id, uint64(n.s.now)<<16|n.rolls)
}

// restoredBase mirrors zab's base for a log restarted under a state that
// came from elsewhere: epoch 0's counter at that index.
func restoredBase(index uint64) logBase {
	if index == 0 || index > 1<<32-1 {
		return logBase{index: index}
	}
	return logBase{index: index, zxid: zab.MakeZxid(0, uint32(index))}
}

// crash stops the incarnation as a power loss does.
func (n *node) crash(keepPct int) {
	if torn := n.disk.crash(keepPct); torn > 0 {
		n.s.stats.Faults["torn-kept"]++
	}
	n.s.logf("member %d crashed", n.id)
	n.up, n.core, n.applyQ, n.waiters, n.lateEpochs = false, nil, nil, nil, nil
	n.role = zab.RoleLooking
}

func (n *node) wallClock() int64 { return wallClockBase + n.s.now + n.clockOffset }

func (n *node) handle(it *item) {
	switch it.kind {
	case evDeliver:
		n.core.Step(it.from, it.msg, n.wallClock())
	case evTick:
		n.core.Tick()
		n.s.ag.push(&item{at: n.s.now + n.tickPeriod, kind: evTick, to: n.id, inc: n.inc})
	case evFsync:
		if it.gen != n.fsyncGen || len(n.disk.group) == 0 {
			return // drained meanwhile
		}
		d := n.disk.syncGroup()
		if n.lateEpochs != nil {
			n.persistEpochs(*n.lateEpochs)
			n.lateEpochs = nil
		}
		n.startGroup()
		n.core.LogDurable(d)
	case evApply:
		n.applyAt = false
		n.applyAll()
		return // the applier feeds the core only through SnapshotTaken
	case evReady:
		n.readyAt = false
		n.ready()
		return
	}
	n.readySoon()
}

// readySoon takes the Core's Ready now, or (half the time, unless the
// Core says its output is urgent) a little later, after more inputs: the
// real driver gathers what arrives together and takes one Ready for it
// all.
func (n *node) readySoon() {
	if n.core.Urgent() || n.dice().IntN(2) == 0 {
		n.ready()
		return
	}
	if !n.readyAt {
		n.readyAt = true
		n.s.ag.push(&item{at: n.s.now + n.dice().Int64N(4), kind: evReady, to: n.id, inc: n.inc})
	}
}

// startGroup starts the next group write if the writer is idle.
func (n *node) startGroup() {
	if n.disk.startGroup() {
		n.fsyncGen++
		n.s.ag.push(&item{at: n.s.now + 1 + n.dice().Int64N(n.fsyncMax), kind: evFsync, to: n.id, inc: n.inc, gen: n.fsyncGen})
	}
}

// ready takes the Core's Ready and carries it out in the contract's order.
func (n *node) ready() {
	for n.up && n.s.err == nil {
		rd := n.core.Ready()
		early := n.carry(&rd)
		if early == 0 {
			return
		}
		n.core.LogDurable(early) // SabotageEarlyDurable
	}
}

func (n *node) carry(rd *zab.Ready) (early uint64) {
	s, d := n.s, n.disk
	if rd.Fatal != nil {
		s.fail(s.chk.fail(n.id, "the core stopped the member: %v", rd.Fatal))
		return 0
	}
	// 1. Drain the writer.
	if rd.Drain {
		d.drain()
		n.fsyncGen++
		if n.lateEpochs != nil {
			n.persistEpochs(*n.lateEpochs)
			n.lateEpochs = nil
		}
	}
	// 2. Install a synchronization durably.
	if rd.Sync != nil {
		n.install(rd.Sync)
	}
	// 3. The committed configuration, atomically, then committed entries
	// to the applier.
	if m := rd.Membership; m != nil && s.opts.Sabotage != SabotageForgetMembership {
		s.stats.Checks["membership-forward"]++
		if old := d.membership; old != nil && m.Version < old.Version {
			s.fail(s.chk.fail(n.id, "Ready.Membership persists version %s over %s", zab.FormatZxid(m.Version), zab.FormatZxid(old.Version)))
		}
		c := *m
		d.membership = &c
		if !s.versions[m.Version] {
			s.versions[m.Version] = true
			s.stats.Reconfigs++
		}
	}
	if len(rd.Committed) > 0 && !s.opts.EndToEndOnly {
		s.stats.Checks["committed-durable"]++
		if last := rd.Committed[len(rd.Committed)-1].Index; last > d.durableIndex() {
			s.fail(s.chk.fail(n.id, "Ready.Committed hands index %d to the applier, the disk holds through %d", last, d.durableIndex()))
		}
	}
	if len(rd.Committed) > 0 {
		for _, e := range rd.Committed {
			if e.Origin == n.id {
				if w := n.waiters[e.ReqID]; w != nil {
					w.dispatched = true
				}
			}
		}
		n.applyQ = append(n.applyQ, applyItem{entries: copyEntries(rd.Committed)})
		n.scheduleApply()
	}
	// 4. Epochs, before any message.
	if rd.Epochs != nil {
		if s.opts.Sabotage == SabotageLateEpochs {
			e := *rd.Epochs
			n.lateEpochs = &e
		} else {
			n.persistEpochs(*rd.Epochs)
		}
	}
	// 5. Entries to the group-commit writer.
	if len(rd.Entries) > 0 {
		if err := d.write(rd.Entries); err != nil {
			s.fail(s.chk.fail(n.id, "Ready.Entries: %v", err))
			return 0
		}
		n.startGroup()
		if s.opts.Sabotage == SabotageEarlyDurable {
			early = rd.Entries[len(rd.Entries)-1].Index
		}
	}
	// 6. Messages.
	for _, o := range rd.Messages {
		if !s.opts.EndToEndOnly {
			s.fail(n.checkOutbound(&o.Msg, rd.Sync != nil))
		}
		s.send(n.id, o.To, o.Msg)
	}
	// 7. The rest.
	for _, r := range rd.Refused {
		n.fail(r.ReqID, r.Err)
	}
	if rd.FailProposals != nil {
		for id, w := range n.waiters {
			if !w.dispatched {
				n.fail(id, rd.FailProposals)
			}
		}
	}
	for _, a := range rd.Answers {
		floor, ok := n.reads[a.ID]
		if !ok {
			s.fail(s.chk.fail(n.id, "an answer to request %d, which was never asked or already answered", a.ID))
			continue
		}
		delete(n.reads, a.ID)
		if a.Err == nil {
			s.stats.Reads++
			s.fail(s.chk.readIndex(n.id, a.Index, floor))
		}
	}
	for _, c := range rd.Calls {
		// The leader handler of a CallLeader echoes its payload (the
		// simulator makes no calls of its own; a core that asks anyway
		// gets an answer).
		s.send(n.id, c.From, zab.Message{Type: zab.MsgCallResp, Nonce: c.Nonce, Data: c.Payload})
	}
	for _, sr := range rd.SnapshotRequests {
		n.applyQ = append(n.applyQ, applyItem{snap: &sr})
		n.scheduleApply()
	}
	for _, rc := range rd.RoleChanges {
		n.role, n.epoch = rc.Role, rc.Epoch
		s.logf("member %d %s, leader %d, epoch %d", n.id, rc.Role, rc.LeaderID, rc.Epoch)
		if rc.Role == zab.RoleLeader {
			s.stats.Elections++
			s.fail(s.chk.leader(n.id, rc.Epoch, d))
		}
	}
	// After the role changes: a transfer succeeds in the Ready that
	// makes this member follow the target.
	for _, x := range rd.Transfers {
		n.transferDone(x)
	}
	return early
}

// checkOutbound checks what a message about to leave says about this
// member's disk: an acknowledgement names only durable entries,
// FOLLOWERINFO and ACKEPOCH offer the durable log's end, ACKEPOCH and
// LEADERINFO follow a persisted acceptedEpoch, ACKNEWLEADER a persisted
// currentEpoch.
func (n *node) checkOutbound(m *zab.Message, synced bool) error {
	d, st := n.disk, n.s.stats
	switch m.Type {
	case zab.MsgAck, zab.MsgAckNewLeader, zab.MsgHeartbeatAck:
		st.Checks["ack-durable"]++
		if m.Index > d.durableIndex() {
			return n.s.chk.fail(n.id, "%s names index %d, the disk holds through %d", m.Type, m.Index, d.durableIndex())
		}
	}
	if (m.Type == zab.MsgFollowerInfo || m.Type == zab.MsgAckEpoch) && !synced {
		// The history a follower offers is the one on its disk (unless
		// the message was made before this Ready's synchronization
		// reshaped the log: then it is stale, as a late copy would be).
		st.Checks["history-durable"]++
		if z, ok := d.zxidAt(m.Index); m.Index > d.durableIndex() || !ok || z != m.Zxid {
			return n.s.chk.fail(n.id, "%s offers index %d zxid %s, the disk holds through %d (zxid there %s)",
				m.Type, m.Index, zab.FormatZxid(m.Zxid), d.durableIndex(), zab.FormatZxid(z))
		}
	}
	switch m.Type {
	case zab.MsgAckEpoch, zab.MsgLeaderInfo:
		st.Checks["epoch-persisted"]++
		if d.accepted < m.Epoch {
			return n.s.chk.fail(n.id, "%s for epoch %d, persisted acceptedEpoch is %d", m.Type, m.Epoch, d.accepted)
		}
	case zab.MsgAckNewLeader:
		st.Checks["epoch-persisted"]++
		if d.current < m.Epoch {
			return n.s.chk.fail(n.id, "%s for epoch %d, persisted currentEpoch is %d", m.Type, m.Epoch, d.current)
		}
	}
	return nil
}

func (n *node) persistEpochs(e zab.Epochs) {
	n.disk.accepted, n.disk.current = e.Accepted, e.Current
}

// install carries out a SyncInstall: restore the snapshot and restart the
// log at it, or truncate; then append the entries; all durably (unless
// SabotageLazySync leaves the entries to the group writer).
func (n *node) install(in *zab.SyncInstall) {
	s, d := n.s, n.disk
	if len(d.group)+len(d.queued) > 0 {
		s.fail(s.chk.fail(n.id, "a Sync while the writer holds entries %d-%d (no Drain before it)", d.durableIndex()+1, d.lastIndex()))
		return
	}
	var before []zab.Entry
	if d.lastIndex() > d.base.index {
		before, _ = d.entries(d.base.index+1, d.lastIndex())
	}
	switch {
	case in.Snapshot != nil:
		// The applier restores it after the entries it already holds
		// (snapshot requests wait: they answer the Core later).
		n.applyEntriesQueued()
		if err := d.sm.restore(in.Snapshot.Data); err != nil {
			s.fail(s.chk.fail(n.id, "restore snapshot at %d: %v", in.Snapshot.Index, err))
			return
		}
		if d.sm.index != in.Snapshot.Index {
			s.fail(s.chk.fail(n.id, "snapshot says index %d, its state is at %d", in.Snapshot.Index, d.sm.index))
			return
		}
		s.fail(s.chk.restored(n.id, d.sm.index, d.sm.hash))
		d.resetAt(logBase{index: in.Snapshot.Index, zxid: in.Snapshot.Zxid})
		s.stats.Faults["sync-snap"]++
	case in.Truncate:
		if err := d.truncateAfter(in.TruncateAfter); err != nil {
			s.fail(s.chk.fail(n.id, "truncate: %v", err))
			return
		}
		s.stats.Faults["sync-trunc"]++
	default:
		s.stats.Faults["sync-diff"]++
	}
	if len(in.Entries) > 0 {
		if err := d.write(in.Entries); err != nil {
			s.fail(s.chk.fail(n.id, "Sync.Entries: %v", err))
			return
		}
		if s.opts.Sabotage == SabotageLazySync {
			n.startGroup()
		} else {
			d.drain()
		}
	}
	// Whatever the log held and no longer holds the same was cut: none of
	// it may have been committed.
	var removed []zab.Entry
	for _, e := range before {
		if e.Index <= d.base.index {
			continue // in the restored state
		}
		if z, ok := d.zxidAt(e.Index); !ok || z != e.Zxid {
			removed = append(removed, e)
		}
	}
	if len(removed) > 0 {
		s.fail(s.chk.cut(n.id, removed))
		n.cutTo = true
	}
	if in.Snapshot != nil {
		n.cutTo = true
	}
}

func (n *node) scheduleApply() {
	if !n.applyAt {
		n.applyAt = true
		n.s.ag.push(&item{at: n.s.now + n.dice().Int64N(maxApplyDelay+1), kind: evApply, to: n.id, inc: n.inc})
	}
}

// applyEntriesQueued applies the entries queued for the applier now and
// keeps its other work queued.
func (n *node) applyEntriesQueued() {
	var rest []applyItem
	for _, it := range n.applyQ {
		if it.snap != nil {
			rest = append(rest, it)
			continue
		}
		if !n.applyEntries(it.entries) {
			return
		}
	}
	n.applyQ = rest
}

// applyAll is the applier taking its whole queue: entries in order (those
// a restored snapshot already covers skipped), snapshots between them.
func (n *node) applyAll() {
	s, sm := n.s, &n.disk.sm
	q := n.applyQ
	n.applyQ = nil
	for _, it := range q {
		if it.snap != nil {
			snap := zab.Snapshot{Peer: it.snap.Peer, Nonce: it.snap.Nonce}
			snap.Index, snap.Data = sm.index, sm.snapshot()
			z, ok := n.disk.zxidAt(sm.index)
			if !ok {
				snap.Err = fmt.Errorf("snapshot at index %d: its zxid is no longer known", sm.index)
			}
			snap.Zxid = z
			n.core.SnapshotTaken(snap)
			n.ready()
			if !n.up || s.err != nil {
				return
			}
			continue
		}
		if !n.applyEntries(it.entries) {
			return
		}
	}
}

// applyEntries applies committed entries (skipping those a restored
// snapshot covers) and answers this member's proposers; false if the
// applier failed.
func (n *node) applyEntries(ents []zab.Entry) bool {
	s, sm := n.s, &n.disk.sm
	for i := range ents {
		e := &ents[i]
		if e.Index <= sm.index {
			continue
		}
		if err := sm.apply(e); err != nil {
			s.fail(s.chk.fail(n.id, "applier: %v", err))
			return false
		}
		s.fail(s.chk.applied(n.id, e, sm.hash))
		if e.Origin == n.id {
			if w := n.waiters[e.ReqID]; w != nil {
				delete(n.waiters, e.ReqID)
				s.stats.Acked++
				s.chk.ack(n.id, e.ReqID, e.Index)
				if w.probe && s.live {
					s.liveDone = true
				}
			}
		}
	}
	return true
}

// propose makes a local proposal.
func (n *node) propose(probe bool) {
	n.reqSeq++
	id := n.reqSeq
	n.waiters[id] = &waiter{probe: probe}
	n.s.stats.Proposals++
	n.core.Propose(zab.Proposal{ReqID: id, Data: fmt.Appendf(nil, "%d/%d", n.id, id), Time: n.wallClock()})
	n.readySoon()
}

// read asks the Core for a read index.
func (n *node) read() {
	n.readSeq++
	n.reads[n.readSeq] = n.s.chk.appliedMax()
	n.core.ReadIndex(n.readSeq)
	n.readySoon()
}

// fail answers a waiting proposal with err.
func (n *node) fail(reqID uint64, err error) {
	if _, ok := n.waiters[reqID]; !ok {
		return
	}
	delete(n.waiters, reqID)
	if errors.Is(err, zab.ErrNoLeader) && !n.s.opts.IgnoreRefusals {
		n.s.fail(n.s.chk.refuse(n.id, reqID))
	}
}

// trim makes the state machine durable and trims the log below it.
func (n *node) trim(keep uint64) {
	d := n.disk
	d.sm.sync()
	if d.sm.index > keep {
		d.trimThrough(d.sm.index - keep)
	}
}

func (n *node) leading() bool { return n.up && n.role == zab.RoleLeader }

func (n *node) describe() string {
	if !n.up {
		return fmt.Sprintf("%d down", n.id)
	}
	st := n.core.Status()
	out := fmt.Sprintf("%d %s leader=%d epoch=%d/%d last=%d commit=%d applied=%d", n.id, st.Role, st.LeaderID,
		st.AcceptedEpoch, st.Epoch, st.LastIndex, st.CommittedIndex, n.disk.sm.index)
	if n.s.trace.Spares > 0 {
		active, pending := n.core.Membership()
		out += " members " + active.String()
		if pending != nil {
			out += " pending " + pending.String()
		}
	}
	return out
}
