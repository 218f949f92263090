package zab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// replica drives a member's Core, a single member's included: it owns the
// transport, the log writer, the applier, the epoch file, the waiting
// callers and time. One goroutine (run) feeds the Core its inputs
// (messages, ticks, local requests, what the writer reports durable,
// snapshots taken), then takes the Core's Ready and carries it out in the
// order Ready's comment gives; the Core decides everything else.
//
// One thing the driver adds for a leader that is the only voter (see
// lone): it hands its new entries to the applier as it hands them to the
// writer, so that a DurableWaiter state machine applies them while the
// log's fdatasync runs (see handEarly).
type replica struct {
	m      *Member
	cfg    Config
	log    *slog.Logger
	wal    *wal
	lw     *logWriter
	sm     StateMachine
	tr     Transport
	ownsTr bool
	id     uint64
	core   *Core
	// early is sm as a DurableWaiter, or nil.
	early DurableWaiter
	// noAddress is set for a member with no peer address: it runs with
	// no transport and cannot change its membership.
	noAddress bool
	// lone is set by the loop while this member leads as the only voter
	// of every configuration in play (Core.LoneLeader).
	lone atomic.Bool

	inbox chan loopEvent
	apply applyQueue

	// waiters are this member's proposals awaiting their entry, by ReqID.
	wmu     sync.Mutex
	waiters map[uint64]*proposal
	reqSeq  uint64 // under wmu

	smu    sync.Mutex
	status Status // published by the loop
	// conf and next are the Core's configurations as last published
	// (see publishMembership); confSet once they have been.
	conf    Membership
	next    *Membership
	confSet bool

	// Loop-owned.
	rpcs         map[uint64]*rpcWait // local ReadIndex and Call, by request ID
	rpcSeq       uint64
	written      uint64    // the last index handed to the writer or installed
	handed       uint64    // the last index handed to the applier
	hbRound      uint64    // the latest heartbeat round sent
	hbSentAt     time.Time // when it went out, for PeerRoundTrip
	lookingSince time.Time // when this member last started looking for a leader
	role         Role
	// loneTurn holds the proposals a lone leader took in this turn of the
	// loop, so that one look at the disk covers them all (proposeLone).
	loneTurn []*proposal
}

type loopEvent struct {
	prop     *proposal
	read     *rpcWait
	call     *rpcWait
	snap     *Snapshot
	transfer *rpcWait // a leader transfer to transferTo
	// transferTo is the target of transfer.
	transferTo uint64
	// onLoop, if set, runs on the loop with the Core (tests set up states
	// that take billions of entries to reach this way).
	onLoop func(*Core)
}

type rpcWait struct {
	payload []byte
	done    chan rpcResult // buffered 1
}

type rpcResult struct {
	index uint64
	data  []byte
	err   error
}

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

func openMember(cfg Config, sm StateMachine, lock *dirLock) (*Member, error) {
	ep, w, applied, err := openLog(cfg, sm)
	if err != nil {
		return nil, err
	}
	// The last configuration this member applied, if it persisted one,
	// names the ensemble; the configured peers only start a new one (or,
	// joining, say where to find it).
	conf, err := readMembership(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if applied, err = replayLone(cfg, sm, w, conf, applied); err != nil {
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
	all := make(map[uint64]string)
	for id, a := range cfg.Peers {
		all[id] = a
	}
	for id, a := range cfg.Observers {
		all[id] = a
	}
	tr := cfg.Transport
	owns := false
	noAddress := tr == nil && all[cfg.ID] == ""
	switch {
	case noAddress && (len(all) > 1 || conf != nil && len(conf.members()) > 1):
		return nil, fmt.Errorf("member %d has no peer address, and other members to reach", cfg.ID)
	case noAddress:
		tr, owns = newNoTransport(), true
	case tr == nil:
		peers := all
		if conf != nil {
			peers = conf.Addrs
		}
		tr, err = NewTCPTransport(TCPConfig{ID: cfg.ID, Listen: all[cfg.ID], Peers: peers, Logger: cfg.Logger, TLS: cfg.PeerTLS})
		if err != nil {
			return nil, err
		}
		owns = true
	}

	m := &Member{
		cfg:    cfg,
		logger: cfg.Logger,
		sm:     sm,
		wal:    w,
		lock:   lock,
		stopCh: make(chan struct{}),
		done:   make(chan struct{}),
		roles:  newRoleFeed(),
	}
	m.appliedIndex.Store(applied)
	m.lastZxid.Store(w.lastZxid)
	m.epoch.Store(ep.Current)

	var seed [24]byte
	rand.Read(seed[:])
	r := &replica{
		m: m, cfg: cfg, log: cfg.Logger, wal: w, sm: sm, tr: tr, ownsTr: owns, id: cfg.ID, noAddress: noAddress,
		inbox:   make(chan loopEvent, 4096),
		waiters: make(map[uint64]*proposal),
		reqSeq:  binary.LittleEndian.Uint64(seed[:8]) >> 1, // unique across restarts in practice
		rpcs:    make(map[uint64]*rpcWait),
	}
	_, canSnap := sm.(Snapshotter)
	ccfg := CoreConfig{
		ID:             cfg.ID,
		ElectionTicks:  uint64(max(2, cfg.ElectionTimeout/cfg.HeartbeatInterval)),
		MaxDiffEntries: cfg.MaxDiffEntries,
		CanSnapshot:    canSnap,
		Seed:           [2]uint64{binary.LittleEndian.Uint64(seed[8:]), binary.LittleEndian.Uint64(seed[16:])},
		Log:            walReader{w},
		Logger:         cfg.Logger,
		Epochs:         ep,
		LastIndex:      w.lastIndex,
		LastZxid:       w.lastZxid,
		LastTime:       w.lastTime,
		Applied:        applied,
		Unapplied:      tail,
		Addrs:          all,
		Membership:     conf,
		Join:           cfg.Join,
	}
	for id := range cfg.Peers {
		ccfg.Voters = append(ccfg.Voters, id)
	}
	for id := range cfg.Observers {
		ccfg.Observers = append(ccfg.Observers, id)
	}
	r.core, err = NewCore(ccfg)
	if err != nil {
		return nil, err
	}
	r.early, _ = sm.(DurableWaiter)
	r.written = w.lastIndex
	r.handed = applied
	r.apply.init()
	r.lw = newLogWriter(w, w.lastIndex, cfg.CheckSpace, cfg.NoSpaceRetry)
	m.rep = r
	if conf != nil && cfg.Join {
		cfg.Logger.Info("zab member has a configuration; not joining", "id", cfg.ID, "membership", conf.String())
	}
	cfg.Logger.Info("zab member started", "id", cfg.ID, "membership", r.core.conf.String(), "votes", r.core.voter, "joining", r.core.joining,
		"accepted_epoch", ep.Accepted, "current_epoch", ep.Current, "last_index", w.lastIndex,
		"last_zxid", FormatZxid(w.lastZxid), "applied_index", applied)

	r.role = RoleLooking
	r.lookingSince = time.Now()
	if err := r.carryOut(r.core.Ready()); err != nil {
		return nil, err
	}
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

// replayLone applies, at start-up, the log of a member that is the only
// voter of its configuration, and returns the new applied index. Every
// entry on such a member's disk is committed (a lone voter's write is its
// quorum): its Core, leading at once, would commit them all in its first
// Ready anyway. Applying them here first lets a Skipper state machine say
// whether it holds writes above the end of the log: entries applied
// during their flush (see handEarly) can outlive the log's copy in a
// power loss. The new log then starts above them, so that no index is
// ever reused for different entries. A tail holding a membership change
// may hold a pending change: that is left to the Core.
func replayLone(cfg Config, sm StateMachine, w *wal, conf *Membership, applied uint64) (uint64, error) {
	voters := slices.Collect(maps.Keys(cfg.Peers))
	if conf != nil {
		voters = conf.Voters
	}
	if len(voters) != 1 || voters[0] != cfg.ID || (cfg.Join && conf == nil) {
		return applied, nil
	}
	if w.lastIndex > applied {
		change := false
		err := w.read(applied+1, w.lastIndex, replayBatchEntries, func(batch []Entry) error {
			change = change || slices.ContainsFunc(batch, func(e Entry) bool { return e.Kind == EntryMembership })
			return nil
		})
		if err != nil || change {
			return applied, err
		}
		err = w.read(applied+1, w.lastIndex, replayBatchEntries, func(batch []Entry) error {
			if _, err := sm.Apply(batch); err != nil {
				return fmt.Errorf("replay entries %d-%d: %w", batch[0].Index, batch[len(batch)-1].Index, err)
			}
			return nil
		})
		if err != nil {
			return applied, err
		}
		cfg.Logger.Info("replayed log", "from", applied+1, "to", w.lastIndex)
		applied = w.lastIndex
	}
	if sk, ok := sm.(Skipper); ok {
		if c := sk.Ceiling(); c > max(w.lastIndex, applied) {
			cfg.Logger.Warn("state machine holds writes above the end of the log; skipping their indexes",
				"log_last_index", w.lastIndex, "ceiling", c)
			if err := sk.SkipTo(c); err != nil {
				return applied, fmt.Errorf("skip to %d: %w", c, err)
			}
			applied = c
		}
	}
	return applied, nil
}

// noTransport is the transport of a member with no peer address: nobody
// can reach it, and it sends to nobody.
type noTransport struct {
	recv chan Envelope
	once sync.Once
}

func newNoTransport() *noTransport { return &noTransport{recv: make(chan Envelope)} }

func (t *noTransport) Send(uint64, Message)     {}
func (t *noTransport) Receive() <-chan Envelope { return t.recv }
func (t *noTransport) Close() error {
	t.once.Do(func() { close(t.recv) })
	return nil
}

// walReader is the Core's view of the durable log.
type walReader struct{ w *wal }

func (l walReader) Entries(from, to uint64) ([]Entry, error) {
	var out []Entry
	err := l.w.read(from, to, replayBatchEntries, func(b []Entry) error {
		out = append(out, b...)
		return nil
	})
	return out, err
}

func (l walReader) ZxidAt(index uint64) (uint64, bool)        { return l.w.zxidAt(index) }
func (l walReader) IndexAtOrBelow(zxid uint64) (uint64, bool) { return l.w.indexAtOrBelow(zxid) }
func (l walReader) FirstIndex() uint64                        { return l.w.firstIndex() }

// ---- caller-facing ----

// submit registers a proposal and queues it for the protocol loop, which
// hands proposals to the Core in queue order.
func (r *replica) submit(ctx context.Context, data []byte, leaderEpoch uint32) (*proposal, error) {
	p := &proposal{ctx: ctx, data: append([]byte(nil), data...), done: make(chan result, 1), leaderEpoch: leaderEpoch}
	return p, r.enqueue(p)
}

// enqueue registers p as waiting for its entry and queues it for the
// protocol loop.
func (r *replica) enqueue(p *proposal) error {
	m := r.m
	if err := r.lw.holding(); err != nil {
		// This member could not log (or so apply) the entry: refuse it
		// here rather than commit it elsewhere and wait.
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	r.wmu.Lock()
	r.reqSeq++
	p.reqID = r.reqSeq
	r.waiters[p.reqID] = p
	r.wmu.Unlock()
	select {
	case r.inbox <- loopEvent{prop: p}:
		return nil
	case <-m.stopCh:
		r.takeWaiter(p.reqID)
		return m.stoppedErr()
	case <-p.ctx.Done():
		r.takeWaiter(p.reqID)
		return p.ctx.Err()
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

func (r *replica) statusOf(stopped bool) Status {
	r.smu.Lock()
	s := r.status
	r.smu.Unlock()
	s.AppliedIndex = r.m.appliedIndex.Load()
	// Whatever is applied is committed, even before the loop hears that a
	// lone leader's early-applied entries are durable.
	s.CommittedIndex = max(s.CommittedIndex, s.AppliedIndex)
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
		r.commitOnStop()
		r.failWaiters(m.stoppedErr())
		for id, w := range r.rpcs {
			w.done <- rpcResult{err: m.stoppedErr()}
			delete(r.rpcs, id)
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
			r.core.Step(env.From, env.Msg, r.cfg.Clock().UnixMilli())
		case ev := <-r.inbox:
			r.handleEvent(ev)
			if ev.prop != nil {
				// Let the goroutines that are ready to run go first, before
				// the drain below: under load they are mostly clients about
				// to submit, and what they queue meanwhile joins this turn.
				// etcd puts arrive one per stream, so without this most
				// turns held one proposal and paid a turn's costs (the space
				// check's statfs, a hand-over to the writer) for each (see
				// "Proposals taken together" in docs/benchmarks.md). With
				// nothing else ready to run it returns at once, so a lone
				// client waits no longer.
				runtime.Gosched()
			}
		case <-r.lw.done:
			if !r.logDurable() {
				return
			}
		case <-tick:
			r.core.Tick()
		}
		// Take whatever else is ready, so that one message to each peer and
		// one hand-over to the writer cover it all; but carry out at once a
		// Ready that later inputs depend on.
	drain:
		for range 512 {
			if r.core.Urgent() {
				break
			}
			select {
			case env, ok := <-recv:
				if !ok {
					break drain
				}
				r.core.Step(env.From, env.Msg, r.cfg.Clock().UnixMilli())
			case ev := <-r.inbox:
				r.handleEvent(ev)
			case <-r.lw.done:
				if !r.logDurable() {
					return
				}
			default:
				break drain
			}
		}
		r.proposeLone()
		if err := r.carryOut(r.core.Ready()); err != nil {
			m.fail(err)
			return
		}
	}
}

// commitOnStop lets the writer finish the append in progress, then
// hands the applier what that commits: for a lone leader, everything the
// log holds. A stopping single member so applies and answers every
// proposal its log took, and a proposal fails with ErrStopped only if its
// entry is not in the log. Elsewhere the Core commits nothing more here.
func (r *replica) commitOnStop() {
	r.lw.close()
	<-r.lw.exited
	d, err := r.lw.state()
	if err != nil {
		return
	}
	r.core.LogDurable(d)
	rd := r.core.Ready()
	if rd.Membership != nil {
		return // a change must reach its file first; the next start applies it
	}
	r.handCommitted(rd.Committed)
}

// logDurable passes on what the writer reports durable. A write error
// stops the member.
func (r *replica) logDurable() bool {
	d, err := r.lw.state()
	if err != nil {
		r.m.fail(fmt.Errorf("append entries: %w", err))
		return false
	}
	r.core.LogDurable(d)
	return true
}

// carryOut does what a Ready asks, in the order Ready's comment gives.
func (r *replica) carryOut(rd Ready) error {
	if rd.Fatal != nil {
		return rd.Fatal
	}
	// 1. Everything handed to the writer earlier is durable first.
	if rd.Drain && !r.drainLog() {
		return r.m.stoppedErr()
	}
	// 2. The synchronization, durably.
	if rd.Sync != nil {
		if err := r.installSync(rd.Sync); err != nil {
			return err
		}
	}
	// 3. The committed configuration, before the entries that carry it
	// reach the applier: a restarted member never holds an applied
	// configuration entry its membership file does not reflect.
	if rd.Membership != nil {
		if err := writeMembership(r.cfg.Dir, *rd.Membership); err != nil {
			return err
		}
	}
	// Membership shows it before the applier has applied its entry, so
	// that a caller who waited for that index reads the configuration.
	r.publishMembership()
	// Committed entries to the applier.
	r.handCommitted(rd.Committed)
	// 4. Epochs, before any message of this Ready.
	if rd.Epochs != nil {
		if err := writeEpochs(r.cfg.Dir, *rd.Epochs); err != nil {
			return err
		}
	}
	// 5. Entries to the writer, which writes while the messages go out.
	if len(rd.Entries) > 0 {
		r.lw.enqueue(rd.Entries)
		r.written = rd.Entries[len(rd.Entries)-1].Index
	}
	r.lone.Store(r.core.LoneLeader())
	r.handEarly(rd.Entries)
	// 6. Messages, to the members of the configurations in play.
	r.publishMembership() // a change appended by this Ready is pending
	if rd.HeartbeatRound != 0 {
		r.hbRound, r.hbSentAt = rd.HeartbeatRound, time.Now()
	}
	for _, o := range rd.Messages {
		r.tr.Send(o.To, o.Msg)
	}
	// 7. The rest.
	for _, f := range rd.Refused {
		if p := r.takeWaiter(f.ReqID); p != nil {
			p.finish(nil, f.Err)
		}
	}
	if rd.FailProposals != nil {
		r.failWaiters(rd.FailProposals)
	}
	for _, a := range rd.Answers {
		if w := r.rpcs[a.ID]; w != nil {
			delete(r.rpcs, a.ID)
			w.done <- rpcResult{index: a.Index, data: a.Data, err: a.Err}
		}
	}
	for _, call := range rd.Calls {
		r.serveCall(call)
	}
	for _, s := range rd.SnapshotRequests {
		r.apply.push(applyItem{snap: &s})
	}
	for _, rt := range rd.RoundTrips {
		if rt.Round == r.hbRound {
			r.cfg.Observer.PeerRoundTrip(rt.Peer, time.Since(r.hbSentAt))
		}
	}
	for _, rc := range rd.RoleChanges {
		switch {
		case rc.Role == RoleLooking && r.role != RoleLooking:
			r.lookingSince = time.Now()
		case rc.Role != RoleLooking && r.role == RoleLooking:
			r.cfg.Observer.ElectionFinished(time.Since(r.lookingSince))
		}
		r.role = rc.Role
		if rc.Role == RoleRemoved {
			// Step 3 handed the applier the last entries it gets.
			r.m.markRemoved(r.handed)
		}
		r.m.roles.publish(rc)
	}
	r.publish(rd)
	// After publish: a transfer's caller that reads Status sees the new
	// leader.
	for _, x := range rd.Transfers {
		if w := r.rpcs[x.ReqID]; w != nil {
			delete(r.rpcs, x.ReqID)
			w.done <- rpcResult{err: x.Err}
		}
	}
	return nil
}

// hand passes entries on to the applier; their proposals are then
// answered by the applier, not by failWaiters.
func (r *replica) hand(it applyItem) {
	r.wmu.Lock()
	for _, e := range it.entries {
		if e.Origin == r.id {
			if p := r.waiters[e.ReqID]; p != nil {
				p.dispatched = true
			}
		}
	}
	r.wmu.Unlock()
	r.apply.push(it)
	r.handed = it.entries[len(it.entries)-1].Index
}

// handCommitted hands committed entries to the applier, but for those
// it was handed early.
func (r *replica) handCommitted(ents []Entry) {
	for len(ents) > 0 && ents[0].Index <= r.handed {
		ents = ents[1:]
	}
	if len(ents) > 0 {
		r.hand(applyItem{entries: ents})
	}
}

// handEarly hands a lone leader's new entries, just handed to the writer,
// to a DurableWaiter state machine at once, so that it applies them while
// the log's fdatasync runs; the applier's durable waits for the writer to
// report them on disk. That is safe because a lone voter's write is its
// quorum: once its own log holds the entries they are committed, which is
// what the Core will say a moment later (those Committed entries are then
// not handed again), and ApplyWhen shows nothing before durable returns.
// If the write fails the member stops, with nothing of the entries
// visible. What it cannot prevent is a power loss keeping the state
// machine's writes and losing the log's: replayLone handles that at
// start-up (see Skipper). Entries are handed early only in order: right
// after everything before them was handed.
func (r *replica) handEarly(ents []Entry) {
	if r.early == nil || len(ents) == 0 || !r.lone.Load() || ents[0].Index != r.handed+1 {
		return
	}
	r.hand(applyItem{entries: ents, early: true})
}

// drainLog waits until everything handed to the writer is durable, so
// that the log may then be changed or named. It reports false if the
// member is stopping or the writer failed.
func (r *replica) drainLog() bool {
	for {
		d, err := r.lw.state()
		if err != nil {
			r.m.fail(fmt.Errorf("append entries after index %d: %w", d, err))
			return false
		}
		if d >= r.written {
			return true
		}
		select {
		case <-r.lw.done:
		case <-r.m.stopCh:
			return false
		}
	}
}

// installSync makes a synchronization durable: the snapshot restored (by
// the applier, after everything handed to it) and the log restarted at
// it, or the log truncated; then the entries appended.
func (r *replica) installSync(s *SyncInstall) error {
	switch {
	case s.Snapshot != nil:
		sn := s.Snapshot
		done := make(chan error, 1)
		r.apply.push(applyItem{restore: &restoreRequest{index: sn.Index, zxid: sn.Zxid, data: sn.Data, done: done}})
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("install snapshot at index %d: %w", sn.Index, err)
			}
		case <-r.m.stopCh:
			return ErrStopped
		}
		// The state is durable at the snapshot: only now may the log forget
		// what came before it.
		if err := r.wal.resetAt(logBase{index: sn.Index, zxid: sn.Zxid}); err != nil {
			return fmt.Errorf("restart log after snapshot %d: %w", sn.Index, err)
		}
		r.handed = max(r.handed, sn.Index)
		r.resetLog(sn.Index)
		r.log.Info("installed snapshot", "id", r.id, "index", sn.Index, "zxid", FormatZxid(sn.Zxid), "bytes", len(sn.Data))
	case s.Truncate:
		if err := r.wal.truncateAfter(s.TruncateAfter); err != nil {
			return fmt.Errorf("truncate log after index %d: %w", s.TruncateAfter, err)
		}
		r.resetLog(s.TruncateAfter)
	}
	if len(s.Entries) > 0 {
		if err := r.wal.append(s.Entries); err != nil {
			return fmt.Errorf("append synchronized entries: %w", err)
		}
		r.resetLog(s.Entries[len(s.Entries)-1].Index)
	}
	return nil
}

// resetLog records that the driver changed the log itself, with the
// writer idle: index is now the last entry on disk.
func (r *replica) resetLog(index uint64) {
	r.written = index
	r.lw.reset(index)
}

// serveCall runs the leader handler for a follower's CallLeader on its own
// goroutine, owned by the member (it ends when the member stops), and
// sends the answer.
func (r *replica) serveCall(call LeaderCall) {
	m := r.m
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := m.untilStopped(context.Background())
		defer cancel()
		ctx, cancelTimeout := context.WithTimeout(ctx, 4*r.cfg.ElectionTimeout)
		defer cancelTimeout()
		out, err := m.callLocal(ctx, call.Payload)
		resp := Message{Type: MsgCallResp, Nonce: call.Nonce, Data: out}
		if err != nil {
			resp.Err = err.Error()
		}
		r.tr.Send(call.From, resp)
	}()
}

// publish records the Core's figures for Status.
func (r *replica) publish(rd Ready) {
	cs := rd.Status
	st := Status{
		ID: r.id, Role: cs.Role, LeaderID: cs.LeaderID, Epoch: cs.Epoch, AcceptedEpoch: cs.AcceptedEpoch,
		LastZxid: cs.LastZxid, LastIndex: cs.LastIndex, CommittedIndex: cs.CommittedIndex,
		LeaderChanges: cs.LeaderChanges,
	}
	r.smu.Lock()
	switch {
	case cs.Role != RoleLeader:
	case rd.PeerAcked != nil:
		st.PeerAcked = rd.PeerAcked
	default:
		st.PeerAcked = r.status.PeerAcked
	}
	r.status = st
	r.smu.Unlock()
	r.m.lastZxid.Store(cs.LastZxid)
	r.m.epoch.Store(cs.Epoch)
}

// ---- local requests ----

func (r *replica) handleEvent(ev loopEvent) {
	if ev.prop == nil {
		r.proposeLone() // what came before goes first
	}
	switch {
	case ev.prop != nil:
		r.handleProposal(ev.prop)
	case ev.read != nil:
		r.rpcSeq++
		r.rpcs[r.rpcSeq] = ev.read
		r.core.ReadIndex(r.rpcSeq)
	case ev.call != nil:
		r.rpcSeq++
		r.rpcs[r.rpcSeq] = ev.call
		r.core.Call(r.rpcSeq, ev.call.payload)
	case ev.snap != nil:
		r.core.SnapshotTaken(*ev.snap)
	case ev.onLoop != nil:
		ev.onLoop(r.core)
	case ev.transfer != nil:
		r.rpcSeq++
		r.rpcs[r.rpcSeq] = ev.transfer
		r.core.TransferLeadership(r.rpcSeq, ev.transferTo)
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
	if r.lone.Load() && p.change == nil {
		// A lone leader refuses what its disk cannot take before it enters
		// the log, as nobody else could log it instead; proposeLone does,
		// at the end of the turn.
		r.loneTurn = append(r.loneTurn, p)
		return
	}
	r.proposeLone()
	now := r.cfg.Clock().UnixMilli()
	if ch := p.change; ch != nil {
		ch.ReqID, ch.Time = p.reqID, now
		r.core.ProposeMembership(*ch)
		return
	}
	r.propose(p, now)
}

// propose hands the Core p's entry, timed now.
func (r *replica) propose(p *proposal, now int64) {
	r.core.Propose(Proposal{ReqID: p.reqID, Data: p.data, LeaderEpoch: p.leaderEpoch, Time: now})
}

// proposeLone hands the Core, in the order taken, the proposals a lone
// leader took in this turn of the loop, refusing those its disk cannot
// take. One look at the file system (a statfs) for all of them, where one
// per proposal was 7% of a single member's CPU per write; only if they do
// not fit together is each asked alone, as each was before (a turn of one
// is asked alone at once).
func (r *replica) proposeLone() {
	turn := r.loneTurn
	if len(turn) == 0 {
		return
	}
	need := 0
	for _, p := range turn {
		need += len(p.data)
	}
	fit := len(turn) > 1 && r.lw.fits(need) == nil
	now := r.cfg.Clock().UnixMilli()
	for _, p := range turn {
		if !fit {
			if err := r.lw.checkSpace(len(p.data)); err != nil {
				if r.takeWaiter(p.reqID) != nil {
					p.finish(nil, fmt.Errorf("%w: %w", ErrNoSpace, err))
				}
				continue
			}
		}
		r.propose(p, now)
	}
	clear(turn)
	r.loneTurn = turn[:0]
}

// takeIfGone reports whether p is no longer waiting (its caller gave up).
func (r *replica) takeIfGone(p *proposal) bool {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.waiters[p.reqID] != p
}

// ---- the applier ----

type applyItem struct {
	entries []Entry
	// early marks entries handed before they are durable (see handEarly).
	early   bool
	snap    *SnapshotRequest
	restore *restoreRequest
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
	for range r.apply.signal {
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
				var durable uint64 // the last entry handed early
				if items[i].early {
					durable = batch[len(batch)-1].Index
				}
				for i+1 < len(items) && items[i+1].entries != nil && len(batch) < replayBatchEntries {
					i++
					batch = append(batch, items[i].entries...)
					if items[i].early {
						durable = batch[len(batch)-1].Index
					}
				}
				if err := r.applyEntries(batch, durable); err != nil {
					failed = true
					if !errors.Is(err, ErrStopped) {
						m.fail(err)
					}
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
	}
}

// applyEntries applies ents; when durable is not 0, entries up to it were
// handed before they were on disk, and the state machine is told to wait
// for that (see handEarly).
func (r *replica) applyEntries(ents []Entry, durable uint64) error {
	first, last := ents[0].Index, ents[len(ents)-1].Index
	if applied := r.m.appliedIndex.Load(); first != applied+1 {
		if last <= applied {
			return nil // already held (a snapshot covered them)
		}
		return fmt.Errorf("apply entries %d-%d after applied index %d: not contiguous", first, last, applied)
	}
	var (
		results []Result
		err     error
	)
	r.m.handedIndex.Store(last)
	if durable != 0 {
		results, err = r.early.ApplyWhen(ents, func() error { return r.lw.waitDurable(durable) })
	} else {
		results, err = r.sm.Apply(ents)
	}
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
				if p.change != nil {
					conf, err := membershipOf(e)
					if err != nil {
						return err // the Core decoded it already: cannot happen
					}
					p.conf = &conf
				}
				p.finish(results[i], nil)
			}
		}
	}
	return nil
}

func (r *replica) applyOther(it applyItem) error {
	switch {
	case it.snap != nil:
		res := &Snapshot{Peer: it.snap.Peer, Nonce: it.snap.Nonce}
		ss, ok := r.sm.(Snapshotter)
		if !ok {
			res.Err = errors.New("the state machine cannot take snapshots")
		} else {
			var buf bytes.Buffer
			res.Index, res.Err = ss.Snapshot(&buf)
			res.Data = buf.Bytes()
			if res.Err == nil {
				z, known := r.wal.zxidAt(res.Index)
				if !known {
					res.Err = fmt.Errorf("snapshot at index %d: its zxid is no longer known", res.Index)
				}
				res.Zxid = z
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
		r.m.handedIndex.Store(it.restore.index)
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
