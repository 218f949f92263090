package zab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"
)

// replica runs Zab for a member with peers. One goroutine (run) owns every
// piece of protocol state: it reads the transport, the tick and the local
// requests, hands entries to the log writer goroutine (and learns from it
// what is durable), and hands committed entries to the applier goroutine.
// Nothing it sends depends on data that is not yet where the protocol says
// it must be:
//
//   - acceptedEpoch is persisted before ACKEPOCH is sent, and before a
//     leader sends LEADERINFO;
//   - currentEpoch is persisted after the synchronized entries are on disk
//     (and committed ones handed to the applier) and before ACKNEWLEADER;
//     a leader persists it once a quorum has acknowledged the new epoch;
//   - ACK and ACKNEWLEADER name only entries that are fdatasync'ed;
//   - a leader counts itself in a quorum only for entries on its own disk;
//   - only committed entries are applied; a restarted member applies
//     nothing beyond what its state machine had until a leader tells it
//     what is committed.
type replica struct {
	m       *Member
	cfg     Config
	log     *slog.Logger
	wal     *wal
	lw      *logWriter
	sm      StateMachine
	tr      Transport
	ownsTr  bool
	id      uint64
	voters  []uint64
	members []uint64 // voters and observers, but not this member
	quorum  int
	// lastLeadership is the (leader, epoch) last counted in leaderChanges.
	lastLeadership [2]uint64
	leaderChanges  uint64
	lookingSince   time.Time // when this member last started looking for a leader
	voter          bool

	inbox chan loopEvent
	apply applyQueue

	// waiters are this member's proposals awaiting their entry, by ReqID.
	wmu     sync.Mutex
	waiters map[uint64]*proposal
	reqSeq  uint64 // under wmu

	smu    sync.Mutex
	status Status // published by the loop

	// Loop-owned.
	rng        *mrand.Rand
	now        uint64 // ticks since start
	etTicks    uint64
	ep         epochs
	role       string
	leader     uint64
	lastIndex  uint64 // last entry assigned (leader) or received (follower), maybe not yet durable
	lastZxid   uint64
	lastTime   int64
	written    uint64 // last index handed to the log writer
	durable    uint64 // last index on disk
	commit     uint64
	dispatched uint64
	pending    []Entry // appended in memory, handed to the writer at the next flush
	tail       []Entry // entries handed to the writer; always holds everything above dispatched
	el         election
	ls         *leaderState
	fs         *followerState
	rpcs       map[uint64]*rpcWait // follower side ReadIndex and Call, by nonce
	nonceSeq   uint64
}

type loopEvent struct {
	prop *proposal
	read *rpcWait
	call *rpcWait
	snap *snapResult
}

type rpcWait struct {
	payload []byte
	done    chan rpcResult // buffered 1
	expires uint64
}

type rpcResult struct {
	index uint64
	data  []byte
	err   error
}

const (
	finalizeTicks = 2    // how long a quorum of votes must stand before the election ends
	recentEntries = 4096 // entries kept in memory after applying, for resending
	maxResend     = 1024 // entries per retransmitted PROPOSAL
)

// restoredBase is the base of a new log whose state machine already holds
// index entries from elsewhere (a restored backup; 0 for a brand-new
// member). Its zxid is epoch 0's counter index: no entry is ever logged in
// epoch 0, so it names no real history, yet every member restored from one
// backup (one state at one index) gets the same, and they synchronize with
// an empty DIFF. A leader whose log does not start there sends a snapshot.
func restoredBase(index uint64) logBase {
	if index == 0 || index > math.MaxUint32 {
		return logBase{index: index}
	}
	return logBase{index: index, zxid: MakeZxid(0, uint32(index))}
}

func openReplicated(cfg Config, sm StateMachine, lock *dirLock) (*Member, error) {
	ep, w, applied, err := openLog(cfg, sm)
	if err != nil {
		return nil, err
	}
	switch {
	case w.segmentCount() == 0:
		err = w.resetAt(restoredBase(applied))
	case applied > w.lastIndex:
		cfg.Logger.Warn("state machine is ahead of the log; starting a new log",
			"applied_index", applied, "log_last_index", w.lastIndex)
		err = w.resetAt(restoredBase(applied))
	default:
		err = w.resume()
	}
	if err != nil {
		return nil, err
	}
	// Entries above the applied index may not be committed: they wait in
	// memory until a leader says so.
	var tail []Entry
	if w.lastIndex > applied {
		err := w.read(applied+1, w.lastIndex, replayBatchEntries, func(b []Entry) error {
			tail = append(tail, b...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	tr := cfg.Transport
	owns := false
	if tr == nil {
		addr := cfg.Peers[cfg.ID]
		if addr == "" {
			addr = cfg.Observers[cfg.ID]
		}
		all := make(map[uint64]string)
		for id, a := range cfg.Peers {
			all[id] = a
		}
		for id, a := range cfg.Observers {
			all[id] = a
		}
		tr, err = NewTCPTransport(TCPConfig{ID: cfg.ID, Listen: addr, Peers: all, Logger: cfg.Logger, TLS: cfg.PeerTLS})
		if err != nil {
			return nil, err
		}
		owns = true
	}

	m := &Member{
		cfg:      cfg,
		logger:   cfg.Logger,
		sm:       sm,
		wal:      w,
		lock:     lock,
		syncReqs: make(chan chan syncResult),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
		roles:    newRoleFeed(),
	}
	m.appliedIndex.Store(applied)
	m.committedIndex.Store(applied)
	m.lastZxid.Store(w.lastZxid)
	m.epoch.Store(ep.Current)

	var seed [16]byte
	rand.Read(seed[:])
	r := &replica{
		m: m, cfg: cfg, log: cfg.Logger, wal: w, sm: sm, tr: tr, ownsTr: owns, id: cfg.ID,
		inbox:      make(chan loopEvent, 4096),
		waiters:    make(map[uint64]*proposal),
		reqSeq:     binary.LittleEndian.Uint64(seed[:8]) >> 1, // unique across restarts in practice
		rng:        mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))),
		ep:         ep,
		lastIndex:  w.lastIndex,
		lastZxid:   w.lastZxid,
		lastTime:   w.lastTime,
		written:    w.lastIndex,
		durable:    w.lastIndex,
		commit:     applied,
		dispatched: applied,
		tail:       tail,
		rpcs:       make(map[uint64]*rpcWait),
	}
	r.apply.init()
	r.lw = newLogWriter(w, w.lastIndex, cfg.CheckSpace, cfg.NoSpaceRetry)
	for id := range cfg.Peers {
		r.voters = append(r.voters, id)
		if id != cfg.ID {
			r.members = append(r.members, id)
		}
	}
	for id := range cfg.Observers {
		if id != cfg.ID {
			r.members = append(r.members, id)
		}
	}
	slices.Sort(r.voters)
	slices.Sort(r.members)
	r.quorum = len(r.voters)/2 + 1
	_, r.voter = cfg.Peers[cfg.ID]
	r.etTicks = uint64(max(2, cfg.ElectionTimeout/cfg.HeartbeatInterval))
	m.rep = r
	cfg.Logger.Info("zab member started", "id", cfg.ID, "voters", r.voters, "observer", !r.voter,
		"accepted_epoch", ep.Accepted, "current_epoch", ep.Current, "last_index", w.lastIndex,
		"last_zxid", FormatZxid(w.lastZxid), "applied_index", applied)

	r.becomeLooking("start")
	m.wg.Add(3)
	go func() {
		defer m.wg.Done()
		r.lw.run()
	}()
	go r.run()
	go r.runApplier()
	if cfg.TrimInterval > 0 {
		m.wg.Add(1)
		go m.runTrimmer()
	}
	go m.supervise()
	return m, nil
}

// ---- caller-facing ----

// submit registers a proposal and queues it for the protocol loop, which
// proposes (leader) or forwards (follower) proposals in queue order.
func (r *replica) submit(ctx context.Context, data []byte, leaderEpoch uint32) (*proposal, error) {
	m := r.m
	if err := r.lw.noSpaceErr(); err != nil {
		// This member could not log (or so apply) the entry: refuse it
		// here rather than commit it elsewhere and wait.
		return nil, fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	p := &proposal{ctx: ctx, data: append([]byte(nil), data...), done: make(chan result, 1), leaderEpoch: leaderEpoch}
	r.wmu.Lock()
	r.reqSeq++
	p.reqID = r.reqSeq
	r.waiters[p.reqID] = p
	r.wmu.Unlock()
	select {
	case r.inbox <- loopEvent{prop: p}:
		return p, nil
	case <-m.stopCh:
		r.takeWaiter(p.reqID)
		return nil, m.stoppedErr()
	case <-ctx.Done():
		r.takeWaiter(p.reqID)
		return nil, ctx.Err()
	}
}

func (r *replica) takeWaiter(reqID uint64) *proposal {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	p := r.waiters[reqID]
	delete(r.waiters, reqID)
	return p
}

// failWaiters fails every waiting proposal whose entry has not been handed
// to the applier.
func (r *replica) failWaiters(err error) {
	r.wmu.Lock()
	var failed []*proposal
	for id, p := range r.waiters {
		if !p.dispatched {
			failed = append(failed, p)
			delete(r.waiters, id)
		}
	}
	r.wmu.Unlock()
	for _, p := range failed {
		p.finish(nil, err)
	}
}

func (r *replica) rpc(ctx context.Context, ev loopEvent, w *rpcWait) (rpcResult, error) {
	m := r.m
	select {
	case r.inbox <- ev:
	case <-m.stopCh:
		return rpcResult{}, m.stoppedErr()
	case <-ctx.Done():
		return rpcResult{}, ctx.Err()
	}
	select {
	case res := <-w.done:
		return res, res.err
	case <-ctx.Done():
		return rpcResult{}, ctx.Err()
	case <-m.done:
		return rpcResult{}, m.stoppedErr()
	}
}

func (r *replica) readIndex(ctx context.Context) (uint64, error) {
	w := &rpcWait{done: make(chan rpcResult, 1)}
	res, err := r.rpc(ctx, loopEvent{read: w}, w)
	return res.index, err
}

func (r *replica) callLeader(ctx context.Context, payload []byte) ([]byte, error) {
	w := &rpcWait{payload: append([]byte(nil), payload...), done: make(chan rpcResult, 1)}
	res, err := r.rpc(ctx, loopEvent{call: w}, w)
	if err != nil && errors.Is(err, errRunLocally) {
		return r.m.callLocal(ctx, payload)
	}
	return res.data, err
}

var errRunLocally = errors.New("zab: this member leads")

func (r *replica) statusOf(stopped bool) Status {
	r.smu.Lock()
	s := r.status
	r.smu.Unlock()
	s.AppliedIndex = r.m.appliedIndex.Load()
	s.FirstIndex = r.wal.firstIndex()
	s.Segments = r.wal.segmentCount()
	s.Stopped = stopped
	return s
}

// ---- the loop ----

func (r *replica) run() {
	m := r.m
	defer m.wg.Done()
	defer r.apply.close()
	defer r.lw.close()
	tick, stopTick := r.cfg.NewTicker(r.cfg.HeartbeatInterval)
	defer stopTick()
	recv := r.tr.Receive()
	defer func() {
		r.failWaiters(m.stoppedErr())
		for n, w := range r.rpcs {
			w.done <- rpcResult{err: m.stoppedErr()}
			delete(r.rpcs, n)
		}
		if r.ownsTr {
			r.tr.Close()
		}
	}()
	for {
		select {
		case <-m.stopCh:
			return
		default:
		}
		select {
		case <-m.stopCh:
			return
		case env, ok := <-recv:
			if !ok {
				m.fail(errors.New("transport closed"))
				return
			}
			r.handle(env)
		case ev := <-r.inbox:
			r.handleEvent(ev)
		case <-r.lw.done:
			r.logDurable()
		case <-tick:
			r.tick()
		}
		// Take whatever else is ready, so that one message to each peer and
		// one hand-over to the writer cover it all.
	drain:
		for range 512 {
			select {
			case env, ok := <-recv:
				if !ok {
					break drain
				}
				r.handle(env)
			case ev := <-r.inbox:
				r.handleEvent(ev)
			case <-r.lw.done:
				r.logDurable()
			default:
				break drain
			}
		}
		if err := r.flush(); err != nil {
			m.fail(err)
			return
		}
	}
}

// fatal stops the member after an error the protocol cannot continue past
// (a log or epoch file that cannot be written).
func (r *replica) fatal(err error) {
	r.m.fail(err)
}

func (r *replica) stopped() bool {
	select {
	case <-r.m.stopCh:
		return true
	default:
		return false
	}
}

// flush hands pending entries to the log writer, advances the commit
// index and hands committed, durable entries to the applier. It never
// waits for the disk: the writer reports through logDurable.
func (r *replica) flush() error {
	if _, err := r.lw.state(); err != nil {
		return err
	}
	if len(r.pending) > 0 {
		if r.ls != nil && r.ls.phase == lBroadcast {
			// Followers write while the leader does.
			msg := Message{Type: MsgProposal, Epoch: r.ls.epoch, Entries: r.pending}
			for id, ps := range r.ls.peers {
				if ps.phase >= pSynced {
					r.send(id, msg)
				}
			}
		}
		r.lw.enqueue(r.pending)
		r.tail = append(r.tail, r.pending...)
		r.written = r.pending[len(r.pending)-1].Index
		// Not reused: the transport may still be encoding the PROPOSAL.
		r.pending = nil
	}
	if r.ls != nil && r.ls.phase == lBroadcast {
		r.advanceCommit()
	}
	r.dispatch()
	r.publish()
	return nil
}

// logDurable takes what the writer reports: a follower acknowledges the
// newly durable entries at once; a leader counts them at the end of this
// loop turn (flush). A write error stops the member.
func (r *replica) logDurable() {
	d, err := r.lw.state()
	if err != nil {
		r.fatal(fmt.Errorf("append entries after index %d: %w", r.durable, err))
		return
	}
	// A report can be stale after the loop changed the log itself (see
	// drainLog); only ever move forward from it, and never past what was
	// handed over.
	if d <= r.durable || d > r.written {
		return
	}
	r.durable = d
	if fs := r.fs; fs != nil && fs.phase >= fSynced {
		r.send(r.leader, Message{Type: MsgAck, Epoch: fs.epoch, Seq: fs.seq, Index: r.durable})
	}
}

// drainLog waits until everything handed to the writer is durable, so the
// loop may then change the log itself (truncate it, restart it, append to
// it synchronously) or rely on r.durable being the last entry handed
// over. It reports false if the member is stopping or the writer failed.
func (r *replica) drainLog() bool {
	for r.durable < r.written {
		select {
		case <-r.lw.done:
		case <-r.m.stopCh:
			return false
		}
		d, err := r.lw.state()
		if err != nil {
			r.fatal(fmt.Errorf("append entries after index %d: %w", r.durable, err))
			return false
		}
		r.durable = max(r.durable, min(d, r.written))
	}
	return true
}

// logChanged records that the loop rewrote the log's tail itself, after
// drainLog: index is now the last entry on disk.
func (r *replica) logChanged(index uint64) {
	r.written, r.durable = index, index
	r.lw.reset(index)
}

// dispatch hands committed, durable entries to the applier.
func (r *replica) dispatch() {
	upto := min(r.commit, r.durable)
	if upto <= r.dispatched {
		return
	}
	ents := r.entriesFromTail(r.dispatched+1, upto)
	if len(ents) == 0 {
		return
	}
	r.wmu.Lock()
	for _, e := range ents {
		if e.Origin == r.id {
			if p := r.waiters[e.ReqID]; p != nil {
				p.dispatched = true
			}
		}
	}
	r.wmu.Unlock()
	r.apply.push(applyItem{entries: ents})
	r.dispatched = upto
	r.m.committedIndex.Store(r.commit)
	// Keep a window of applied entries for resending; drop the rest.
	if len(r.tail) > 2*recentEntries {
		keepFrom := r.dispatched - min(r.dispatched, recentEntries)
		if i := r.tailPos(keepFrom); i > 0 {
			r.tail = slices.Clone(r.tail[i:])
		}
	}
}

func (r *replica) tailPos(index uint64) int {
	if len(r.tail) == 0 || index < r.tail[0].Index {
		return 0
	}
	return int(index - r.tail[0].Index)
}

func (r *replica) entriesFromTail(from, to uint64) []Entry {
	if len(r.tail) == 0 || from < r.tail[0].Index || to > r.tail[len(r.tail)-1].Index {
		return nil
	}
	i := int(from - r.tail[0].Index)
	j := int(to - r.tail[0].Index)
	return slices.Clone(r.tail[i : j+1])
}

// durableEntries returns entries [from, to] from memory or the log.
func (r *replica) durableEntries(from, to uint64) ([]Entry, error) {
	if from > to {
		return nil, nil
	}
	if ents := r.entriesFromTail(from, to); ents != nil {
		return ents, nil
	}
	var out []Entry
	err := r.wal.read(from, to, replayBatchEntries, func(b []Entry) error {
		out = append(out, b...)
		return nil
	})
	return out, err
}

func (r *replica) zxidAt(index uint64) (uint64, bool) {
	for _, e := range r.pending {
		if e.Index == index {
			return e.Zxid, true
		}
	}
	return r.wal.zxidAt(index)
}

func (r *replica) publish() {
	st := Status{
		ID: r.id, Role: r.role, LeaderID: r.leader, Epoch: r.ep.Current, AcceptedEpoch: r.ep.Accepted,
		LastZxid: r.lastZxid, LastIndex: r.durable, CommittedIndex: r.commit,
		LeaderChanges: r.leaderChanges,
	}
	if r.role == RoleLooking {
		st.LeaderID = 0
	}
	r.smu.Lock()
	if r.ls != nil {
		st.PeerAcked = r.status.PeerAcked // refreshed by publishPeers
	}
	r.status = st
	r.smu.Unlock()
	r.m.lastZxid.Store(r.lastZxid)
	r.m.epoch.Store(r.ep.Current)
}

// publishPeers records, for Status, how far each synchronized peer has
// acknowledged the log: once a tick, so that acknowledgements cost no
// lock.
func (r *replica) publishPeers() {
	acked := make(map[uint64]uint64, len(r.ls.peers))
	for id, ps := range r.ls.peers {
		if ps.phase >= pSynced {
			acked[id] = ps.acked
		}
	}
	r.smu.Lock()
	r.status.PeerAcked = acked
	r.smu.Unlock()
}

func (r *replica) send(to uint64, m Message) { r.tr.Send(to, m) }

func (r *replica) setRole(role string, leader uint64) {
	switch {
	case role == RoleLooking && r.role != RoleLooking:
		r.lookingSince = time.Now()
	case role != RoleLooking && r.role == RoleLooking && !r.lookingSince.IsZero():
		r.cfg.Observer.ElectionFinished(time.Since(r.lookingSince))
	}
	r.role, r.leader = role, leader
	if role != RoleLooking && leader != 0 {
		seen := [2]uint64{leader, uint64(r.ep.Current)}
		if seen != r.lastLeadership {
			r.lastLeadership = seen
			r.leaderChanges++
		}
	}
	rc := RoleChange{Role: role, LeaderID: leader, Epoch: r.ep.Current}
	if role == RoleLooking {
		rc.LeaderID = 0
	}
	r.m.roles.publish(rc)
	r.log.Info("zab role", "id", r.id, "role", role, "leader", rc.LeaderID, "epoch", r.ep.Current)
	r.publish()
}

func (r *replica) persistEpochs(e epochs) bool {
	if err := writeEpochs(r.cfg.Dir, e); err != nil {
		r.fatal(err)
		return false
	}
	r.ep = e
	return true
}

// randomTicks returns a random wait between one and two election timeouts.
func (r *replica) randomTicks() uint64 { return r.etTicks + r.rng.Uint64N(r.etTicks+1) }

func (r *replica) newNonce() uint64 {
	r.nonceSeq++
	return r.nonceSeq<<16 | r.rng.Uint64N(1<<16)
}

// ---- local requests ----

func (r *replica) handleEvent(ev loopEvent) {
	switch {
	case ev.prop != nil:
		r.handleProposal(ev.prop)
	case ev.read != nil:
		r.handleLocalRead(ev.read)
	case ev.call != nil:
		r.handleLocalCall(ev.call)
	case ev.snap != nil:
		r.handleSnapResult(ev.snap)
	}
}

func (r *replica) handleProposal(p *proposal) {
	if r.takeIfGone(p) {
		return
	}
	if err := p.ctx.Err(); err != nil {
		if r.takeWaiter(p.reqID) != nil {
			p.finish(nil, err)
		}
		return
	}
	leading := r.ls != nil && r.ls.phase == lBroadcast
	if p.leaderEpoch != 0 && (!leading || r.ls.epoch != p.leaderEpoch) {
		if r.takeWaiter(p.reqID) != nil {
			p.finish(nil, ErrLeaderChanged)
		}
		return
	}
	switch {
	case leading:
		if !r.leaderAppend(r.id, p.reqID, p.data) {
			if r.takeWaiter(p.reqID) != nil {
				p.finish(nil, ErrNoLeader)
			}
		}
	case r.fs != nil && r.fs.phase == fBroadcast:
		r.send(r.leader, Message{Type: MsgRequest, Epoch: r.fs.epoch, Origin: r.id, ReqID: p.reqID, Data: p.data})
	default:
		if r.takeWaiter(p.reqID) != nil {
			p.finish(nil, ErrNoLeader)
		}
	}
}

// takeIfGone reports whether p is no longer waiting (its caller gave up).
func (r *replica) takeIfGone(p *proposal) bool {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.waiters[p.reqID] != p
}

func (r *replica) handleLocalRead(w *rpcWait) {
	switch {
	case r.ls != nil && r.ls.phase == lBroadcast:
		r.leaderRead(func(index uint64, err error) { w.done <- rpcResult{index: index, err: err} })
	case r.fs != nil && r.fs.phase == fBroadcast:
		n := r.newNonce()
		w.expires = r.now + 4*r.etTicks
		r.rpcs[n] = w
		r.send(r.leader, Message{Type: MsgReadIndex, Epoch: r.fs.epoch, Nonce: n})
	default:
		w.done <- rpcResult{err: ErrNoLeader}
	}
}

func (r *replica) handleLocalCall(w *rpcWait) {
	switch {
	case r.ls != nil && r.ls.phase == lBroadcast:
		w.done <- rpcResult{err: errRunLocally}
	case r.fs != nil && r.fs.phase == fBroadcast:
		n := r.newNonce()
		w.expires = r.now + 4*r.etTicks
		r.rpcs[n] = w
		r.send(r.leader, Message{Type: MsgCall, Epoch: r.fs.epoch, Nonce: n, Data: w.payload})
	default:
		w.done <- rpcResult{err: ErrNoLeader}
	}
}

func (r *replica) failRPCs(err error) {
	for n, w := range r.rpcs {
		w.done <- rpcResult{err: err}
		delete(r.rpcs, n)
	}
}

// ---- messages ----

func (r *replica) handle(env Envelope) {
	msg := &env.Msg
	if msg.Type == MsgNotification {
		r.handleNotification(env.From, msg)
		return
	}
	if r.ls != nil {
		r.leaderHandle(env.From, msg)
		return
	}
	if r.fs != nil && env.From == r.leader {
		r.followerHandle(msg)
		return
	}
	// Requests that reached a member that does not lead.
	switch msg.Type {
	case MsgRequest:
		r.send(env.From, Message{Type: MsgRequestFail, ReqID: msg.ReqID, Err: ErrNoLeader.Error()})
	case MsgReadIndex:
		r.send(env.From, Message{Type: MsgReadIndexResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
	case MsgCall:
		r.send(env.From, Message{Type: MsgCallResp, Nonce: msg.Nonce, Err: ErrNoLeader.Error()})
	}
}

// ---- role transitions ----

// leaveRole ends whatever role the member had: every waiter that cannot
// be answered by this leadership is failed.
func (r *replica) leaveRole(why string) {
	// Whatever the writer holds becomes durable first, so the log, lastZxid
	// and durable agree again before a vote or FOLLOWERINFO names them.
	r.drainLog()
	wasActive := (r.ls != nil && r.ls.phase == lBroadcast) || (r.fs != nil && r.fs.phase == fBroadcast)
	if r.ls != nil {
		r.ls.failReads(ErrLeaderChanged)
	}
	r.ls, r.fs = nil, nil
	err := ErrNoLeader
	if wasActive {
		err = ErrLeaderChanged
	}
	r.failWaiters(err)
	r.failRPCs(err)
	// Entries not yet written belong to the old leadership; drop them
	// (they were never acknowledged).
	if len(r.pending) > 0 {
		r.lastIndex, r.lastZxid = r.durable, r.walLastZxid()
		r.pending = nil
	}
	_ = why
}

func (r *replica) walLastZxid() uint64 {
	if z, ok := r.wal.zxidAt(r.durable); ok {
		return z
	}
	return r.lastZxid
}

func (r *replica) becomeLooking(why string) {
	if r.role != "" {
		r.log.Info("zab looking for a leader", "id", r.id, "why", why)
	}
	r.leaveRole(why)
	r.el.start(r)
	r.setRole(RoleLooking, 0)
}

func (r *replica) becomeFollower(leader uint64) {
	r.leaveRole("following")
	r.fs = &followerState{phase: fDiscover, nonce: r.newNonce(), heard: r.now, deadline: r.now + r.randomTicks()}
	r.leader = leader
	r.send(leader, r.followerInfo())
}

func (r *replica) followerInfo() Message {
	m := Message{Type: MsgFollowerInfo, Epoch: r.ep.Accepted, Zxid: r.lastZxid, Index: r.durable, Nonce: r.fs.nonce}
	if !r.voter {
		m.Flags |= FlagObserver
	}
	return m
}

// ---- ticks ----

func (r *replica) tick() {
	r.now++
	for n, w := range r.rpcs {
		if r.now > w.expires {
			w.done <- rpcResult{err: ErrNoLeader}
			delete(r.rpcs, n)
		}
	}
	switch {
	case r.ls != nil:
		r.leaderTick()
		if r.ls != nil { // the tick may have ended the leadership
			r.publishPeers()
		}
	case r.fs != nil:
		r.followerTick()
	default:
		r.el.tick(r)
	}
}

// ---- the applier ----

type applyItem struct {
	entries []Entry
	snap    *snapRequest
	restore *restoreRequest
}

type snapRequest struct {
	peer, nonce uint64
}

type snapResult struct {
	peer, nonce uint64
	index, zxid uint64
	data        []byte
	err         error
}

type restoreRequest struct {
	index, zxid uint64
	data        []byte
	done        chan error
}

// applyQueue is an unbounded queue from the loop to the applier, so the
// loop never blocks on a slow state machine.
type applyQueue struct {
	mu     sync.Mutex
	items  []applyItem
	closed bool
	signal chan struct{}
}

func (q *applyQueue) init() { q.signal = make(chan struct{}, 1) }

func (q *applyQueue) push(it applyItem) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *applyQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *applyQueue) take() ([]applyItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items, q.closed
}

func (r *replica) runApplier() {
	m := r.m
	defer m.wg.Done()
	failed := false
	for {
		select {
		case <-r.apply.signal:
			items, closed := r.apply.take()
			for i := 0; i < len(items); i++ {
				if failed {
					if it := items[i]; it.restore != nil {
						it.restore.done <- m.stoppedErr()
					}
					continue
				}
				// Merge consecutive entry batches into one Apply.
				if items[i].entries != nil {
					batch := items[i].entries
					for i+1 < len(items) && items[i+1].entries != nil && len(batch) < replayBatchEntries {
						i++
						batch = append(batch, items[i].entries...)
					}
					if err := r.applyEntries(batch); err != nil {
						failed = true
						m.fail(err)
					}
					continue
				}
				if err := r.applyOther(items[i]); err != nil {
					failed = true
					m.fail(err)
				}
			}
			if closed {
				return
			}
		case req := <-m.syncReqs:
			if failed {
				req <- syncResult{err: m.stoppedErr()}
				continue
			}
			idx, err := r.sm.Sync()
			req <- syncResult{index: idx, err: err}
		}
	}
}

func (r *replica) applyEntries(ents []Entry) error {
	first, last := ents[0].Index, ents[len(ents)-1].Index
	if applied := r.m.appliedIndex.Load(); first != applied+1 {
		if last <= applied {
			return nil // already held (a snapshot covered them)
		}
		return fmt.Errorf("apply entries %d-%d after applied index %d: not contiguous", first, last, applied)
	}
	results, err := r.sm.Apply(ents)
	if err != nil {
		return fmt.Errorf("apply entries %d-%d: %w", first, last, err)
	}
	if len(results) != len(ents) {
		return fmt.Errorf("apply entries %d-%d: state machine returned %d results for %d entries",
			first, last, len(results), len(ents))
	}
	r.m.setApplied(last)
	for i, e := range ents {
		if e.Origin == r.id {
			if p := r.takeWaiter(e.ReqID); p != nil {
				p.finish(results[i], nil)
			}
		}
	}
	return nil
}

func (r *replica) applyOther(it applyItem) error {
	switch {
	case it.snap != nil:
		res := &snapResult{peer: it.snap.peer, nonce: it.snap.nonce}
		ss, ok := r.sm.(Snapshotter)
		if !ok {
			res.err = errors.New("the state machine cannot take snapshots")
		} else {
			var buf bytes.Buffer
			res.index, res.err = ss.Snapshot(&buf)
			res.data = buf.Bytes()
			if res.err == nil {
				z, known := r.wal.zxidAt(res.index)
				if !known {
					res.err = fmt.Errorf("snapshot at index %d: its zxid is no longer known", res.index)
				}
				res.zxid = z
			}
		}
		select {
		case r.inbox <- loopEvent{snap: res}:
		case <-r.m.stopCh:
		}
	case it.restore != nil:
		ss, ok := r.sm.(Snapshotter)
		if !ok {
			it.restore.done <- errors.New("the state machine cannot restore snapshots")
			return nil
		}
		if err := ss.Restore(bytes.NewReader(it.restore.data)); err != nil {
			it.restore.done <- err
			return fmt.Errorf("restore snapshot at index %d: %w", it.restore.index, err)
		}
		if _, err := r.sm.Sync(); err != nil {
			it.restore.done <- err
			return fmt.Errorf("sync restored snapshot: %w", err)
		}
		if got := r.sm.AppliedIndex(); got != it.restore.index {
			err := fmt.Errorf("restored snapshot reports applied index %d, want %d", got, it.restore.index)
			it.restore.done <- err
			return err
		}
		r.m.setApplied(it.restore.index)
		it.restore.done <- nil
	}
	return nil
}
