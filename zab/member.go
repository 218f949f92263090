package zab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/januskv/janus/internal/diskspace"
)

// ErrStopped is returned for proposals that were not committed because the
// member stopped (Close, or a fatal log or apply error).
var ErrStopped = errors.New("zab: member stopped")

// ErrNoSpace is returned for proposals that were refused because this
// member's log could not take them: its disk is full or read-only (or
// Config.CheckSpace said so). Nothing was written; the member keeps
// running and takes writes again once its disk does. NoSpace reports the
// condition.
var ErrNoSpace = errors.New("zab: no space for the log")

// ErrEntryTooLarge is returned by Propose for a payload above
// Config.MaxEntrySize.
var ErrEntryTooLarge = errors.New("zab: entry too large")

// ErrNoLeader is returned by Propose, ReadIndex and CallLeader while this
// member knows no leader it is synchronized with (an election is running,
// or this member is cut off from a quorum). Nothing was proposed; the
// caller may retry, here or on another member.
var ErrNoLeader = errors.New("zab: no leader")

// ErrLeaderChanged is returned to a proposer whose proposal was sent to a
// leader that lost its leadership before this member applied the entry.
// The entry may or may not commit later; a caller that retries must
// tolerate applying its operation twice (or make it idempotent).
var ErrLeaderChanged = errors.New("zab: leader changed before the proposal was applied")

// Config configures a Member. Zero values get the documented defaults.
type Config struct {
	// Dir holds the log segments and the epoch file. It is created if
	// missing and locked against a second member.
	Dir    string
	Logger *slog.Logger // nil discards logs
	// Clock stamps Entry.Time on the leader. nil means time.Now.
	Clock func() time.Time
	// SegmentSize is the size at which the log starts a new segment file
	// (default 64 MiB); each segment file is preallocated to it when
	// created. Trimming removes whole segments.
	SegmentSize int64
	// MaxEntrySize bounds one payload (default 8 MiB).
	MaxEntrySize int
	// MaxBatchEntries and MaxBatchBytes bound one group commit (defaults
	// 1024 entries, 16 MiB); a group always takes at least one proposal.
	MaxBatchEntries int
	MaxBatchBytes   int
	// TrimInterval, when positive, runs Trim that often in the background.
	TrimInterval time.Duration
	// CheckSpace, if set, is asked before each group write with the
	// group's payload bytes. An error it returns for which
	// diskspace.Unwritable holds refuses the write as a full disk would
	// (see ErrNoSpace); the member uses it to keep a reserve free for the
	// state machine, which cannot refuse a committed entry.
	CheckSpace func(need int64) error
	// NoSpaceRetry is how often a replicated member whose disk is full
	// tries again to write the entries it has received (default 1 s).
	NoSpaceRetry time.Duration

	// ID is this member's ID (default 1). It must be a key of Peers or
	// Observers when either is set.
	ID uint64
	// Peers are the voting members, this one included: ID → peer address.
	// Empty, or holding only this member with no Observers, means a single
	// member that is always the leader (no transport, no election).
	Peers map[uint64]string
	// Observers receive every commit but never vote: ID → peer address.
	Observers map[uint64]string
	// Join starts a member that is to join a running ensemble (etcd's
	// --initial-cluster-state existing) and has never persisted a
	// configuration: Peers and Observers, which must name it, are only
	// where to find the ensemble. It has no vote until its first
	// synchronization gives it the ensemble's configuration, which it then
	// persists; an operator adds it to the configuration first. A member
	// that persisted a configuration ignores Join.
	Join bool
	// Transport carries peer messages. nil means a TCP transport listening
	// on this member's address, created by Open and closed by Close. A
	// Transport passed in is not closed by Close.
	Transport Transport
	// PeerTLS, if set, makes the TCP transport's connections mutual TLS
	// with member IDs bound to certificates.
	PeerTLS *PeerTLS
	// ElectionTimeout (default 1 s) is how long a follower waits without
	// hearing its leader, or a leader without hearing a quorum, before it
	// starts an election; and how long each election or synchronization
	// attempt may take. Each attempt waits a random duration between one
	// and two ElectionTimeouts, so that members do not collide forever.
	ElectionTimeout time.Duration
	// HeartbeatInterval (default 100 ms) is the tick of the protocol: the
	// leader's heartbeat period and the retransmission period of every
	// handshake message.
	HeartbeatInterval time.Duration
	// NewTicker makes the protocol's tick source; nil means time.NewTicker.
	// Tests may drive time by returning a channel they feed. stop releases
	// the ticker.
	NewTicker func(d time.Duration) (c <-chan time.Time, stop func())
	// MaxDiffEntries (default 100 000) bounds how many entries a leader
	// sends to synchronize a follower; a follower further behind receives
	// a snapshot instead (when the state machine is a Snapshotter).
	MaxDiffEntries int
	// Observer, if set, is told what operators chart: how long log
	// fsyncs take and how long heartbeats take to come back from each
	// peer. Its methods are called from the log writer and the protocol
	// loop, so they must not block.
	Observer Observer
}

// Observer receives measurements of a running member. Measurements never
// change what the member does.
type Observer interface {
	// LogSynced is called after each fdatasync of the log.
	LogSynced(took time.Duration)
	// PeerRoundTrip is called when a peer answers a leader's heartbeat:
	// the time from sending that heartbeat round to the peer's answer.
	PeerRoundTrip(peer uint64, took time.Duration)
	// ElectionFinished is called when a member that was looking for a
	// leader follows or leads again: how long it looked.
	ElectionFinished(took time.Duration)
}

type noObserver struct{}

func (noObserver) LogSynced(time.Duration)             {}
func (noObserver) PeerRoundTrip(uint64, time.Duration) {}
func (noObserver) ElectionFinished(time.Duration)      {}

const (
	defaultSegmentSize     = 64 << 20
	defaultMaxEntrySize    = 8 << 20
	defaultMaxBatchEntries = 1024
	defaultMaxBatchBytes   = 16 << 20
	replayBatchEntries     = 1024
)

func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		return c, errors.New("zab: Config.Dir is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if c.SegmentSize <= 0 {
		c.SegmentSize = defaultSegmentSize
	}
	if c.MaxEntrySize <= 0 {
		c.MaxEntrySize = defaultMaxEntrySize
	}
	if c.MaxEntrySize > maxEntryDataHard {
		return c, fmt.Errorf("zab: MaxEntrySize %d above the limit %d", c.MaxEntrySize, maxEntryDataHard)
	}
	if c.MaxBatchEntries <= 0 {
		c.MaxBatchEntries = defaultMaxBatchEntries
	}
	if c.NoSpaceRetry <= 0 {
		c.NoSpaceRetry = time.Second
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = defaultMaxBatchBytes
	}
	if c.ID == 0 {
		c.ID = 1
	}
	if c.ElectionTimeout <= 0 {
		c.ElectionTimeout = time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 100 * time.Millisecond
	}
	if err := CheckTimeouts(c.HeartbeatInterval, c.ElectionTimeout); err != nil {
		return c, fmt.Errorf("zab: %w", err)
	}
	if c.NewTicker == nil {
		c.NewTicker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	if c.MaxDiffEntries <= 0 {
		c.MaxDiffEntries = 100_000
	}
	if c.replicated() {
		_, voter := c.Peers[c.ID]
		_, observer := c.Observers[c.ID]
		if voter == observer {
			return c, fmt.Errorf("zab: member %d must be in exactly one of Peers and Observers", c.ID)
		}
		for id := range c.Observers {
			if _, ok := c.Peers[id]; ok || id == 0 {
				return c, fmt.Errorf("zab: member %d is both a peer and an observer", id)
			}
		}
		if _, ok := c.Peers[0]; ok {
			return c, errors.New("zab: member ID 0 is reserved")
		}
	}
	return c, nil
}

// replicated reports whether the configuration has more than one member.
func (c Config) replicated() bool {
	if len(c.Observers) > 0 || len(c.Peers) > 1 {
		return true
	}
	_, self := c.Peers[c.ID]
	return len(c.Peers) == 1 && !self
}

// Status is a snapshot of a member's progress.
type Status struct {
	ID       uint64
	Role     Role
	LeaderID uint64 // the leader this member is synchronized with; 0 while looking
	// Epoch is the current epoch: the epoch of the last leader this member
	// synchronized with (a leader issues zxids in it). AcceptedEpoch is the
	// highest epoch it has promised to follow.
	Epoch          uint32
	AcceptedEpoch  uint32
	LastZxid       uint64 // zxid of the last entry in the log
	LastIndex      uint64 // index of the last entry in the log (on disk, maybe not committed)
	CommittedIndex uint64 // last index known committed (for a single member: on stable storage)
	AppliedIndex   uint64 // last index the state machine has applied
	FirstIndex     uint64 // oldest index the log still holds
	Segments       int    // segment files in the log
	Stopped        bool
	// LeaderChanges counts the leaderships this member has seen since it
	// started (etcd's leader_changes_seen_total): each new (leader,
	// epoch) it follows or holds counts once, the first one included.
	LeaderChanges uint64
	// PeerAcked is, on a leader, the last log index each synchronized
	// member that answered one of the last three heartbeats has
	// acknowledged as on its disk (refreshed every heartbeat interval);
	// nil elsewhere. LastIndex minus it is that member's lag.
	PeerAcked map[uint64]uint64
}

// Member is one member of a Zab ensemble: for now the only one, and so the
// leader. Open starts its goroutines; Close stops them.
type Member struct {
	cfg    Config
	logger *slog.Logger
	sm     StateMachine
	// early is sm as a DurableWaiter, or nil: a single member hands it
	// groups before their flush (see writeGroup).
	early DurableWaiter
	wal   *wal
	lock  *dirLock

	proposals chan *proposal
	committed chan group // writer → applier; its buffer is the pipeline depth
	syncReqs  chan chan syncResult

	stopOnce sync.Once
	stopCh   chan struct{} // closed to ask every goroutine to stop
	done     chan struct{} // closed once everything has stopped and been released
	wg       sync.WaitGroup
	closeErr error // set before done is closed

	errMu sync.Mutex
	err   error // the first fatal error

	// noSpace is why the last write was refused for want of disk (see
	// ErrNoSpace), nil once a write succeeded. Writer-owned, read by
	// NoSpace.
	noSpace atomic.Pointer[error]

	// Writer-owned.
	counter  uint32
	lastTime int64

	epoch          atomic.Uint32
	lastZxid       atomic.Uint64
	committedIndex atomic.Uint64
	appliedIndex   atomic.Uint64

	applied appliedNotifier
	roles   roleFeed

	leaderHandler atomic.Pointer[LeaderHandler]

	// rep runs replication; nil for a single member.
	rep *replica
}

type proposal struct {
	ctx  context.Context
	data []byte
	done chan result // buffered 1: the writer or applier never blocks on it
	// Replicated members only.
	reqID      uint64
	dispatched bool // its entry was handed to the applier (under replica.wmu)
	// leaderEpoch, when not 0, fences the proposal to this member's
	// leadership of that epoch (see SubmitAsLeader).
	leaderEpoch uint32
	// change, when set, makes this a membership change rather than data;
	// conf is then the configuration its applied entry carries.
	change *MembershipChange
	conf   *Membership
}

type result struct {
	val Result
	err error
}

func (p *proposal) finish(val Result, err error) { p.done <- result{val, err} }

type group struct {
	entries []Entry
	props   []*proposal
	// durable, when not nil, delivers the outcome of the group's
	// fdatasync: the group reached the applier before it was durable.
	durable chan error
}

type syncResult struct {
	index uint64
	err   error
}

// Open opens (or creates) the log in cfg.Dir, recovers it, replays every
// entry after sm.AppliedIndex() into sm, persists a new epoch, and starts
// the member. The member runs until Close or a fatal error.
func Open(cfg Config, sm StateMachine) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("zab: create log directory: %w", err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("zab: %w", err)
	}
	var m *Member
	if cfg.replicated() {
		m, err = openReplicated(cfg, sm, lock)
	} else {
		m, err = open(cfg, sm, lock)
	}
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("zab: open %s: %w", cfg.Dir, err)
	}
	return m, nil
}

// openLog reads the persisted epochs and opens the log, refusing one that
// begins after entries the state machine has not applied yet. Both the
// single-member and the replicated start-up begin here.
func openLog(cfg Config, sm StateMachine) (Epochs, *wal, uint64, error) {
	ep, err := readEpochs(cfg.Dir)
	if err != nil {
		return Epochs{}, nil, 0, err
	}
	w, err := openWAL(osFS{}, cfg.Dir, cfg.Logger, cfg.SegmentSize)
	if err != nil {
		return Epochs{}, nil, 0, err
	}
	w.observer = cfg.Observer
	applied := sm.AppliedIndex()
	if first := w.firstIndex(); first > 0 && applied+1 < first {
		w.close()
		return Epochs{}, nil, 0, fmt.Errorf("log begins at index %d but the state machine has applied only through %d: entries %d-%d are gone",
			first, applied, applied+1, first-1)
	}
	return ep, w, applied, nil
}

func open(cfg Config, sm StateMachine, lock *dirLock) (*Member, error) {
	ep, w, applied, err := openLog(cfg, sm)
	if err != nil {
		return nil, err
	}
	if w.lastIndex > applied {
		err := w.read(applied+1, w.lastIndex, replayBatchEntries, func(batch []Entry) error {
			if _, err := sm.Apply(batch); err != nil {
				return fmt.Errorf("replay entries %d-%d: %w", batch[0].Index, batch[len(batch)-1].Index, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		cfg.Logger.Info("replayed log", "from", applied+1, "to", w.lastIndex)
	}
	if sk, ok := sm.(Skipper); ok {
		if c := sk.Ceiling(); c > max(w.lastIndex, applied) {
			cfg.Logger.Warn("state machine holds writes above the end of the log; skipping their indexes",
				"log_last_index", w.lastIndex, "ceiling", c)
			if err := sk.SkipTo(c); err != nil {
				return nil, fmt.Errorf("skip to %d: %w", c, err)
			}
			applied = c
		}
	}

	// A new leadership starts a new epoch, persisted before any zxid in it
	// is issued, so zxids grow across restarts even if the log is empty.
	newEpoch := uint64(max(ep.Accepted, ep.Current, ZxidEpoch(w.lastZxid))) + 1
	if newEpoch > math.MaxUint32 {
		return nil, errors.New("epoch space exhausted")
	}
	if err := writeEpochs(cfg.Dir, Epochs{Accepted: uint32(newEpoch), Current: uint32(newEpoch)}); err != nil {
		return nil, err
	}

	next := max(w.lastIndex, applied) + 1
	switch {
	case w.segmentCount() == 0:
		err = w.reset(next)
	case applied > w.lastIndex:
		// The state machine holds everything the log has (it was restored
		// from elsewhere): the old segments are useless.
		cfg.Logger.Warn("state machine is ahead of the log; starting a new log",
			"applied_index", applied, "log_last_index", w.lastIndex)
		err = w.reset(next)
	default:
		err = w.resume()
	}
	if err != nil {
		return nil, err
	}

	m := &Member{
		cfg:       cfg,
		logger:    cfg.Logger,
		sm:        sm,
		wal:       w,
		lock:      lock,
		proposals: make(chan *proposal, cfg.MaxBatchEntries),
		committed: make(chan group, 1),
		syncReqs:  make(chan chan syncResult),
		stopCh:    make(chan struct{}),
		done:      make(chan struct{}),
		lastTime:  w.lastTime,
		roles:     newRoleFeed(),
	}
	m.early, _ = sm.(DurableWaiter)
	m.roles.publish(RoleChange{Role: RoleLeader, LeaderID: cfg.ID, Epoch: uint32(newEpoch)})
	m.epoch.Store(uint32(newEpoch))
	m.lastZxid.Store(w.lastZxid)
	m.committedIndex.Store(next - 1)
	m.appliedIndex.Store(next - 1)
	cfg.Logger.Info("zab member started", "role", RoleLeader, "epoch", newEpoch,
		"last_index", next-1, "dir", cfg.Dir)

	m.wg.Add(2)
	go m.runWriter()
	go m.runApplier()
	if cfg.TrimInterval > 0 {
		m.wg.Add(1)
		go m.runTrimmer()
	}
	go m.supervise()
	return m, nil
}

// Propose submits data and returns the state machine's result for it once
// it is on stable storage and applied. If ctx ends before the proposal is
// written it is dropped; if it ends later the entry may still commit, and
// Propose returns ctx.Err() without waiting. data is copied.
func (m *Member) Propose(ctx context.Context, data []byte) (Result, error) {
	p, err := m.Submit(ctx, data)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Pending is a submitted proposal whose place in this member's proposal
// order is fixed.
type Pending struct {
	m   *Member
	p   *proposal
	rep *replica
}

// Submit fixes data's place in this member's proposal order and returns
// without waiting for it to commit, so one caller can have many proposals
// in flight: proposals one goroutine submits one after another are written,
// committed and applied in that order (a later one can commit only if the
// earlier ones did, unless an earlier one failed with ErrLeaderChanged or
// was dropped because its ctx ended before it was written). ctx governs the
// proposal until it is written, as for Propose. data is copied.
func (m *Member) Submit(ctx context.Context, data []byte) (*Pending, error) {
	return m.submit(ctx, data, 0)
}

// SubmitAsLeader is Submit for a decision only the leader of epoch may
// make, such as expiring a lease by its own countdown: the proposal enters
// the log only if this member still leads in that epoch when it gets
// there, and is never forwarded. Otherwise it fails with ErrLeaderChanged
// (nothing was proposed). A proposal that did enter the log can still
// commit under a later leader that adopts it, like any other.
func (m *Member) SubmitAsLeader(ctx context.Context, epoch uint32, data []byte) (*Pending, error) {
	if epoch == 0 {
		return nil, errors.New("zab: SubmitAsLeader needs the epoch of a leadership")
	}
	return m.submit(ctx, data, epoch)
}

func (m *Member) submit(ctx context.Context, data []byte, leaderEpoch uint32) (*Pending, error) {
	if len(data) > m.cfg.MaxEntrySize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrEntryTooLarge, len(data), m.cfg.MaxEntrySize)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.rep != nil {
		p, err := m.rep.submit(ctx, data, leaderEpoch)
		if err != nil {
			return nil, err
		}
		return &Pending{m: m, p: p, rep: m.rep}, nil
	}
	p := &proposal{ctx: ctx, data: append([]byte(nil), data...), done: make(chan result, 1)}
	select {
	case m.proposals <- p:
	case <-m.stopCh:
		return nil, m.stoppedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &Pending{m: m, p: p}, nil
}

// Wait returns the state machine's result for the proposal once it is on
// stable storage and applied, or ctx.Err() if ctx ends first (the entry may
// still commit).
func (pd *Pending) Wait(ctx context.Context) (Result, error) {
	m, p := pd.m, pd.p
	select {
	case r := <-p.done:
		return r.val, r.err
	case <-ctx.Done():
		if pd.rep != nil {
			pd.rep.takeWaiter(p.reqID)
		}
		return nil, ctx.Err()
	case <-m.done:
		// Everything has stopped; the proposal was answered or never will be.
		select {
		case r := <-p.done:
			return r.val, r.err
		default:
			return nil, m.stoppedErr()
		}
	}
}

// Trim makes the state machine durable (StateMachine.Sync, run between
// applies) and removes every sealed log segment whose entries are all at
// or below the index Sync covered. It returns that index.
func (m *Member) Trim(ctx context.Context) (uint64, error) {
	req := make(chan syncResult, 1)
	select {
	case m.syncReqs <- req:
	case <-m.stopCh:
		return 0, m.stoppedErr()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	var res syncResult
	select {
	case res = <-req:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if res.err != nil {
		return 0, fmt.Errorf("zab: trim: sync state machine: %w", res.err)
	}
	// Sync ran on the applier, so appliedIndex already covers what it saw.
	if applied := m.appliedIndex.Load(); res.index > applied {
		return 0, fmt.Errorf("zab: trim: state machine says Sync covers index %d but only %d was applied; not trimming",
			res.index, applied)
	}
	removed, err := m.wal.trimThrough(res.index)
	if err != nil {
		return res.index, fmt.Errorf("zab: trim through %d: %w", res.index, err)
	}
	if removed > 0 {
		m.logger.Debug("trimmed log", "through", res.index, "segments_removed", removed,
			"first_index", m.wal.firstIndex())
	}
	return res.index, nil
}

// Status reports the member's progress.
func (m *Member) Status() Status {
	stopped := false
	select {
	case <-m.stopCh:
		stopped = true
	default:
	}
	if m.rep != nil {
		return m.rep.statusOf(stopped)
	}
	return Status{
		ID:             m.cfg.ID,
		Role:           RoleLeader,
		LeaderID:       m.cfg.ID,
		Epoch:          m.epoch.Load(),
		AcceptedEpoch:  m.epoch.Load(),
		LastZxid:       m.lastZxid.Load(),
		LastIndex:      m.committedIndex.Load(),
		CommittedIndex: m.committedIndex.Load(),
		AppliedIndex:   m.appliedIndex.Load(),
		FirstIndex:     m.wal.firstIndex(),
		Segments:       m.wal.segmentCount(),
		Stopped:        stopped,
		LeaderChanges:  1, // a single member leads from the start, once
	}
}

// Done is closed once the member has stopped, after Close or a fatal error.
func (m *Member) Done() <-chan struct{} { return m.done }

// Err returns the fatal error that stopped the member, if any.
func (m *Member) Err() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return m.err
}

// Close stops the member. Proposals already written are applied and
// answered; proposals not yet written fail with ErrStopped. It returns once
// every goroutine has exited and the log is closed. Close is idempotent.
func (m *Member) Close() error {
	m.stop()
	<-m.done
	return m.closeErr
}

func (m *Member) stop() { m.stopOnce.Do(func() { close(m.stopCh) }) }

// fail records a fatal error and stops the member.
func (m *Member) fail(err error) {
	m.errMu.Lock()
	if m.err == nil {
		m.err = err
		m.logger.Error("zab member stopping after a fatal error", "err", err)
	}
	m.errMu.Unlock()
	m.stop()
}

func (m *Member) stoppedErr() error {
	if err := m.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return ErrStopped
}

// supervise waits for the member's goroutines, then fails whatever is
// still queued, closes the log and releases the directory.
func (m *Member) supervise() {
	m.wg.Wait()
	for {
		select {
		case p := <-m.proposals:
			p.finish(nil, m.stoppedErr())
			continue
		default:
		}
		break
	}
	err := m.wal.close()
	if lerr := m.lock.release(); err == nil && lerr != nil {
		err = fmt.Errorf("zab: release log directory lock: %w", lerr)
	}
	m.closeErr = err
	close(m.done)
}

// runWriter is the log writer: it gathers pending proposals into a group,
// appends the group with one fdatasync, and hands it to the applier.
func (m *Member) runWriter() {
	defer m.wg.Done()
	defer close(m.committed)
	for {
		// Checked first so a steady stream of proposals cannot outvote Close.
		select {
		case <-m.stopCh:
			return
		default:
		}
		var first *proposal
		select {
		case <-m.stopCh:
			return
		case first = <-m.proposals:
		}
		g, handed, err := m.writeGroup(m.gather(first))
		if err != nil && !handed && refusedForSpace(err) {
			m.setNoSpace(err)
			for _, p := range g.props {
				p.finish(nil, fmt.Errorf("%w: %w", ErrNoSpace, err))
			}
			continue
		}
		if err == nil && len(g.entries) > 0 {
			m.setNoSpace(nil)
		}
		if err != nil {
			m.fail(err)
			if !handed {
				// A group the applier holds is answered by the applier.
				for _, p := range g.props {
					p.finish(nil, m.stoppedErr())
				}
			}
			return
		}
		if len(g.entries) > 0 && !handed {
			// Blocks while the applier is a group behind: that is the
			// back-pressure that bounds memory.
			m.committed <- g
		}
	}
}

// gather takes first and whatever else is already queued, within the batch
// limits. Waiting for more would only add latency: proposals arriving
// during the fsync form the next group.
func (m *Member) gather(first *proposal) []*proposal {
	props := []*proposal{first}
	size := len(first.data)
	for len(props) < m.cfg.MaxBatchEntries && size < m.cfg.MaxBatchBytes {
		select {
		case p := <-m.proposals:
			props = append(props, p)
			size += len(p.data)
		default:
			return props
		}
	}
	return props
}

// writeGroup stamps the live proposals of props and makes them durable.
// Proposals whose context has ended are answered and dropped unwritten.
//
// When the state machine is a DurableWaiter and the applier is idle, the
// group is handed to it between the write and the fdatasync (handed is
// then true), so that applying overlaps the flush; its durable channel
// then carries the flush's outcome, always exactly once. Otherwise the
// caller hands the group over once it is durable.
func (m *Member) writeGroup(props []*proposal) (g group, handed bool, err error) {
	live := props[:0]
	for _, p := range props {
		if err := p.ctx.Err(); err != nil {
			p.finish(nil, err)
			continue
		}
		live = append(live, p)
	}
	g = group{props: live}
	if len(live) == 0 {
		return g, false, nil
	}
	if m.cfg.CheckSpace != nil {
		need := 0
		for _, p := range live {
			need += len(p.data)
		}
		if err := m.cfg.CheckSpace(int64(need)); err != nil {
			return g, false, &notWrittenError{err}
		}
	}
	// Entry.Time never goes back, even if the wall clock does.
	now := max(m.cfg.Clock().UnixMilli(), m.lastTime)
	index := m.committedIndex.Load()
	counter, epoch := m.counter, m.epoch.Load()
	g.entries = make([]Entry, len(live))
	for i, p := range live {
		if m.counter == math.MaxUint32 {
			if err := m.advanceEpoch(); err != nil {
				return g, false, err
			}
		}
		m.counter++
		index++
		g.entries[i] = Entry{Index: index, Zxid: MakeZxid(m.epoch.Load(), m.counter), Time: now, Data: p.data}
	}
	var written func()
	if m.early != nil {
		written = func() {
			g.durable = make(chan error, 1)
			select {
			case m.committed <- g:
				handed = true
			default:
				g.durable = nil
			}
		}
	}
	err = m.wal.appendThen(g.entries, written)
	if err == nil {
		m.lastTime = now
		m.lastZxid.Store(g.entries[len(g.entries)-1].Zxid)
		// Before the applier may learn the group is durable, so that the
		// applied index never passes the committed one.
		m.committedIndex.Store(index)
	}
	if handed {
		g.durable <- err
	}
	if err != nil && !handed && refusedForSpace(err) && m.epoch.Load() == epoch {
		// Nothing was written: the next group reuses the zxids.
		m.counter = counter
	}
	if err != nil {
		return g, handed, fmt.Errorf("append entries %d-%d: %w", g.entries[0].Index, index, err)
	}
	return g, handed, nil
}

// refusedForSpace reports whether err is an append that wrote nothing
// because the disk cannot take a write for now (see ErrNoSpace).
func refusedForSpace(err error) bool {
	var nw *notWrittenError
	return errors.As(err, &nw) && diskspace.Unwritable(err)
}

// setNoSpace records why writes are refused for want of disk, or (err
// nil) that they are not, logging each change once.
func (m *Member) setNoSpace(err error) {
	var old *error
	if err == nil {
		old = m.noSpace.Swap(nil)
		if old != nil {
			m.logger.Warn("log disk takes writes again; NOSPACE cleared", "was", (*old).Error())
		}
		return
	}
	old = m.noSpace.Swap(&err)
	if old == nil {
		m.logger.Warn("log disk full or read-only: refusing writes (NOSPACE) until it takes them again, still serving reads",
			"err", err)
	}
}

// NoSpace returns why this member refuses writes for want of disk (see
// ErrNoSpace), or nil when its last write attempt succeeded.
func (m *Member) NoSpace() error {
	if m.rep != nil {
		return m.rep.lw.noSpaceErr()
	}
	if p := m.noSpace.Load(); p != nil {
		return *p
	}
	return nil
}

// advanceEpoch moves to the next epoch when the counter is exhausted, as a
// ZooKeeper leader does, persisting it before its first zxid is used.
func (m *Member) advanceEpoch() error {
	next := uint64(m.epoch.Load()) + 1
	if next > math.MaxUint32 {
		return errors.New("epoch space exhausted")
	}
	if err := writeEpochs(m.cfg.Dir, Epochs{Accepted: uint32(next), Current: uint32(next)}); err != nil {
		return err
	}
	m.epoch.Store(uint32(next))
	m.counter = 0
	return nil
}

// runApplier applies committed groups in order and answers their
// proposers. State machine Syncs run here too, between groups.
func (m *Member) runApplier() {
	defer m.wg.Done()
	failed := false
	for {
		select {
		case g, ok := <-m.committed:
			if !ok {
				return
			}
			if failed {
				for _, p := range g.props {
					p.finish(nil, m.stoppedErr())
				}
				continue
			}
			if err := m.applyGroup(g); err != nil {
				failed = true
				m.fail(err)
				for _, p := range g.props {
					p.finish(nil, m.stoppedErr())
				}
			}
		case req := <-m.syncReqs:
			if failed {
				req <- syncResult{err: m.stoppedErr()}
				continue
			}
			idx, err := m.sm.Sync()
			req <- syncResult{index: idx, err: err}
		}
	}
}

func (m *Member) applyGroup(g group) error {
	first, last := g.entries[0].Index, g.entries[len(g.entries)-1].Index
	var (
		results []Result
		err     error
	)
	if g.durable != nil {
		results, err = m.early.ApplyWhen(g.entries, func() error { return <-g.durable })
	} else {
		results, err = m.sm.Apply(g.entries)
	}
	if err != nil {
		return fmt.Errorf("apply entries %d-%d: %w", first, last, err)
	}
	if len(results) != len(g.entries) {
		return fmt.Errorf("apply entries %d-%d: state machine returned %d results for %d entries",
			first, last, len(results), len(g.entries))
	}
	m.setApplied(last)
	for i, p := range g.props {
		p.finish(results[i], nil)
	}
	return nil
}

// untilStopped returns a context that ends when parent does or when the
// member stops; cancel releases the goroutine that watches for the stop.
func (m *Member) untilStopped(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-m.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// runTrimmer trims the log every TrimInterval until the member stops.
func (m *Member) runTrimmer() {
	defer m.wg.Done()
	ctx, cancel := m.untilStopped(context.Background())
	defer cancel()
	t := time.NewTicker(m.cfg.TrimInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := m.Trim(ctx); err != nil && !errors.Is(err, ErrStopped) && ctx.Err() == nil {
				m.logger.Warn("background log trim failed", "err", err)
			}
		}
	}
}

// CheckTimeouts says whether a heartbeat period and an election timeout can
// work together: a follower that misses one heartbeat must still hear the
// next before it gives up on the leader, so the heartbeat is at most half
// the timeout. Configuration checks it before a member starts.
func CheckTimeouts(heartbeat, election time.Duration) error {
	if heartbeat <= 0 || election <= 0 {
		return fmt.Errorf("heartbeat interval %v and election timeout %v must be positive", heartbeat, election)
	}
	if heartbeat > election/2 {
		return fmt.Errorf("heartbeat interval %v must be at most half of the election timeout %v", heartbeat, election)
	}
	return nil
}
