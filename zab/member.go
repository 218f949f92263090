package zab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// ErrRemoved is returned by WaitApplied on a member that a committed
// configuration removed, for an index it will never apply: a removed member
// takes part in nothing, and may learn of its removal before its log holds
// the entries up to it (the COMMIT can come with the PROPOSAL), which it
// then never writes. Whatever it had handed to its state machine is still
// applied.
var ErrRemoved = errors.New("zab: this member was removed from the ensemble")

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
	// NoSpaceRetry is how often a member whose disk is full tries again
	// to write the entries it holds (default 1 s).
	NoSpaceRetry time.Duration

	// ID is this member's ID (default 1). It must be a key of Peers or
	// Observers when either is set.
	ID uint64
	// Peers are the voting members, this one included: ID → peer address.
	// Empty means a single member with no peer address: the one voter of
	// its ensemble, which it leads at once, with no transport; having no
	// address for peers to reach it, it cannot grow. Holding only this
	// member with its address is a single member that can (see
	// ChangeMembership).
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
	if len(c.Peers) == 0 && len(c.Observers) == 0 {
		c.Peers = map[uint64]string{c.ID: ""}
	}
	{
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
	// nil elsewhere, and on a leader until its first heartbeat interval:
	// nil is "not known yet", not "nobody". LastIndex minus it is that
	// member's lag.
	PeerAcked map[uint64]uint64
}

// Member is one member of a Zab ensemble, a single member included (the
// one voter of its ensemble). Open starts its goroutines; Close stops
// them.
type Member struct {
	cfg    Config
	logger *slog.Logger
	sm     StateMachine
	wal    *wal
	lock   *dirLock

	stopOnce sync.Once
	stopCh   chan struct{} // closed to ask every goroutine to stop
	done     chan struct{} // closed once everything has stopped and been released
	wg       sync.WaitGroup
	closeErr error // set before done is closed

	errMu sync.Mutex
	err   error // the first fatal error

	epoch        atomic.Uint32
	lastZxid     atomic.Uint64
	appliedIndex atomic.Uint64
	// handedIndex is the last index handed to the state machine, by an
	// Apply or a restore, before it returned: what a Sync, which runs
	// beside them, may cover.
	handedIndex atomic.Uint64
	// removedAfter is, once a committed configuration removed this
	// member, one more than the last index its driver handed to the
	// applier (which applies nothing after it); zero before.
	removedAfter atomic.Uint64

	applied appliedNotifier
	roles   roleFeed

	leaderHandler atomic.Pointer[LeaderHandler]

	// rep drives the member's Core.
	rep *replica
}

type proposal struct {
	ctx        context.Context
	data       []byte
	done       chan result // buffered 1: the loop or applier never blocks on it
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
	m, err := openMember(cfg, sm, lock)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("zab: open %s: %w", cfg.Dir, err)
	}
	return m, nil
}

// openLog reads the persisted epochs and opens the log, refusing one that
// begins after entries the state machine has not applied yet.
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
	p, err := m.rep.submit(ctx, data, leaderEpoch)
	if err != nil {
		return nil, err
	}
	return &Pending{m: m, p: p, rep: m.rep}, nil
}

// Answered reports whether the proposal's result is in, so that Wait
// would return at once.
func (pd *Pending) Answered() bool { return len(pd.p.done) > 0 }

// Wait returns the state machine's result for the proposal once it is on
// stable storage and applied, or ctx.Err() if ctx ends first (the entry may
// still commit).
func (pd *Pending) Wait(ctx context.Context) (Result, error) {
	m, p := pd.m, pd.p
	select {
	case r := <-p.done:
		return r.val, r.err
	case <-ctx.Done():
		pd.rep.takeWaiter(p.reqID)
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

// Trim makes the state machine durable (StateMachine.Sync, beside the
// applies, which a Sync of tens of milliseconds would otherwise hold up
// once a trim interval) and removes every sealed log segment whose entries
// are all at or below the index Sync covered. It returns that index.
func (m *Member) Trim(ctx context.Context) (uint64, error) {
	select {
	case <-m.stopCh:
		return 0, m.stoppedErr()
	case <-ctx.Done():
		return 0, ctx.Err()
	default:
	}
	synced, err := m.sm.Sync()
	if err != nil {
		return 0, fmt.Errorf("zab: trim: sync state machine: %w", err)
	}
	// The state machine may have counted a group whose Apply has not
	// returned yet; the log is trimmed only through what the member has
	// seen applied.
	if handed := max(m.handedIndex.Load(), m.appliedIndex.Load()); synced > handed {
		return 0, fmt.Errorf("zab: trim: state machine says Sync covers index %d but only %d was handed to it; not trimming",
			synced, handed)
	}
	through := min(synced, m.appliedIndex.Load())
	removed, err := m.wal.trimThrough(through)
	if err != nil {
		return through, fmt.Errorf("zab: trim through %d: %w", through, err)
	}
	if removed > 0 {
		m.logger.Debug("trimmed log", "through", through, "segments_removed", removed,
			"first_index", m.wal.firstIndex())
	}
	return through, nil
}

// Status reports the member's progress.
func (m *Member) Status() Status {
	stopped := false
	select {
	case <-m.stopCh:
		stopped = true
	default:
	}
	return m.rep.statusOf(stopped)
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

// supervise waits for the member's goroutines, then closes the log and
// releases the directory.
func (m *Member) supervise() {
	m.wg.Wait()
	err := m.wal.close()
	if lerr := m.lock.release(); err == nil && lerr != nil {
		err = fmt.Errorf("zab: release log directory lock: %w", lerr)
	}
	m.closeErr = err
	close(m.done)
}

// refusedForSpace reports whether err is an append that wrote nothing
// because the disk cannot take a write for now (see ErrNoSpace).
func refusedForSpace(err error) bool {
	var nw *notWrittenError
	return errors.As(err, &nw) && diskspace.Unwritable(err)
}

// NoSpace returns why this member refuses writes for want of disk (see
// ErrNoSpace), or nil when its last write attempt succeeded.
func (m *Member) NoSpace() error {
	return m.rep.lw.noSpaceErr()
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
