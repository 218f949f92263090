package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/diskspace"
	"github.com/januskv/janus/store"
	"github.com/januskv/janus/zab"
)

// MemberConfig configures a Member. Zero values get the documented defaults.
type MemberConfig struct {
	// DataDir holds the log (DataDir/log) and the state (a Badger
	// directory named by DataDir/STATE, "state" until a snapshot replaced it).
	DataDir string
	Logger  *slog.Logger
	// ID is this member's ID in the ensemble (default 1).
	ID uint64
	// Clock is the wall clock entries are stamped with and leases count
	// down by (default time.Now).
	Clock func() time.Time
	// MinLeaseTTL is the smallest lease TTL in seconds (default 2, etcd's
	// minimum with its default election timeout).
	MinLeaseTTL int64
	// LeaseCheckInterval is how often expired leases are looked for
	// (default 100ms).
	LeaseCheckInterval time.Duration
	// ReaperInterval is how often the leader looks for empty containers
	// and expired TTL nodes to delete (default 1s; see reaper).
	ReaperInterval time.Duration
	// Name and the advertised client addresses, reported in Status.
	Name    string
	EtcdURL string
	ZKAddr  string
	PeerURL string

	// Peers are the voting members, this one included: ID → peer address
	// (host:port). Empty means a single member. Observers receive commits
	// and serve reads but never vote. This member listens on its own entry.
	Peers     map[uint64]string
	Observers map[uint64]string
	// Join starts this member as one joining a running ensemble
	// (--initial-cluster-state existing, zab.Config.Join): Peers and
	// Observers only say where to find it.
	Join bool
	// Clients are every member's advertised client addresses, for Status
	// (etcd MemberList, ZooKeeper srvr/conf). This member's own entry
	// defaults to EtcdURL and ZKAddr.
	Clients map[uint64]ClientAddrs
	// Transport carries peer messages; nil means zab's TCP transport.
	// In-process tests pass a zab.MemNetwork endpoint.
	Transport zab.Transport
	// PeerTLS, if set, is mutual TLS between members (zab.PeerTLS).
	PeerTLS *zab.PeerTLS
	// ElectionTimeout and HeartbeatInterval tune zab (defaults 1s, 100ms).
	ElectionTimeout   time.Duration
	HeartbeatInterval time.Duration
	// MaxDiffEntries is how many missing entries a leader sends a member
	// before it sends a snapshot instead (default zab's, 100 000).
	MaxDiffEntries int
	// ReclaimInterval is how often value log files that became mostly
	// garbage are rewritten to give their space back (default 5 minutes).
	ReclaimInterval time.Duration
	// TrimInterval is how often the log is trimmed below what the state
	// has made durable (default 1 minute).
	TrimInterval time.Duration
	// SpaceReserve is the free space, in bytes, the data directory's file
	// system keeps: below it this member raises its NOSPACE alarm and
	// refuses writes that grow the state; writes that free space go on
	// until half of it is used (default 128 MiB, room for Badger to flush
	// and compact its memtables). Badger writes through memory maps,
	// where running out of disk kills the process, so the reserve is
	// what makes a full disk an alarm instead.
	SpaceReserve int64
	// SpaceFault, if set, is asked before each log write; an error it
	// returns (wrapping ENOSPC or EROFS) refuses the write as a full disk
	// would. Tests use it to fill the disk on demand.
	SpaceFault func() error
	// ApplyFault, if set, is asked before each group of entries is
	// applied, with the group's first index; an error it returns fails
	// the apply as a failing disk would, and so stops the member. Tests
	// use it to see what a stopped member looks like to clients.
	ApplyFault func(index uint64) error
	// Observer, if set, is told what operators chart (log fsyncs, store
	// commits, applies, peer round trips).
	Observer Observer

	// CorruptCheckInterval is how often the leader starts a check that
	// every member's state hashes alike at one log index (0: never).
	// InitialCorruptCheck starts one when the member starts. See
	// corruptChecker.
	CorruptCheckInterval time.Duration
	InitialCorruptCheck  bool

	// QuotaBackendBytes is the space quota (etcd's --quota-backend-bytes):
	// a write that would take the state's size on disk past it raises a
	// NOSPACE alarm and is refused, as is every write that would grow the
	// state until the alarm is disarmed. 0 means DefaultQuotaBytes; a
	// negative quota turns the check off.
	QuotaBackendBytes int64
	// AutoCompaction makes the leader compact history on its own (etcd's
	// --auto-compaction-mode and --auto-compaction-retention); the zero
	// value never compacts.
	AutoCompaction AutoCompaction

	// tamper, set only by tests, rewrites entries before this member
	// applies them: the way a test damages one replica.
	tamper func(*core.Entry)
	// compactTicks, set only by tests, wakes the compactor instead of its
	// ticker, so that a test with a fake Clock decides when it looks;
	// compactLooked, if also set, is told when the compactor has acted on
	// a wake, so the test writes nothing the look could see.
	compactTicks  <-chan time.Time
	compactLooked chan<- struct{}
	// publishEvery, set only by tests, is how often the member looks
	// whether the configuration lacks its name (publishSelf).
	publishEvery time.Duration
}

// ClientAddrs are the addresses a member serves clients on.
type ClientAddrs struct {
	EtcdURL string // e.g. http://127.0.0.1:2379
	ZKAddr  string // host:port
	// ZKElectionAddr is a zoo.cfg's election address (host:port), which
	// Janus only shows back in /zookeeper/config.
	ZKElectionAddr string
}

// Member is one running Janus server's replicated state: a core.Backend.
//
// Leases are owned by the leader: its lessor counts them down and proposes
// the revocation of expired ones; every member follows grants and revokes
// through the log, and a member that becomes leader gives every lease a
// fresh full TTL. Keep-alives received by a follower go to the leader's
// lessor through zab.CallLeader. The reaper of containers and TTL nodes
// has the same owner: it runs on the leader only.
type Member struct {
	cfg    MemberConfig
	log    *slog.Logger
	zab    *zab.Member
	lessor *lessor
	reaper *reaper

	// mu guards the state and the hub, which a snapshot restore replaces
	// together; readers hold it only to pick them up.
	mu    sync.RWMutex
	state *stateRef
	hub   *core.Hub

	roles  roleTracker
	counts counters

	// alarms are the active alarms of the current state (core.Meta).
	alarms atomic.Pointer[[]core.Alarm]
	// auth is etcd's auth store of the current state (core.Meta), which
	// the etcd face checks every request against.
	auth    atomic.Pointer[core.AuthState]
	checker *corruptChecker
	// noSpace is what NoSpace last found, so that each change is logged
	// once.
	noSpace atomic.Bool
	// disk reads the data directory's free space for NoSpace.
	disk *diskspace.Gauge
	// quota is the space quota in bytes, 0 for none (see admit).
	quota int64

	cancel context.CancelFunc
	bg     sync.WaitGroup // role follower, lessor, retiring stores
}

var _ core.Backend = (*Member)(nil)

// OpenMember opens (or creates) the member's data, replays its log and
// joins the ensemble.
func OpenMember(cfg MemberConfig) (*Member, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("server: no data dir")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ID == 0 {
		cfg.ID = 1
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.MinLeaseTTL <= 0 {
		cfg.MinLeaseTTL = 2
	}
	if cfg.LeaseCheckInterval <= 0 {
		cfg.LeaseCheckInterval = 100 * time.Millisecond
	}
	if cfg.ReaperInterval <= 0 {
		cfg.ReaperInterval = time.Second
	}
	if cfg.ReclaimInterval <= 0 {
		cfg.ReclaimInterval = defaultReclaimInterval
	}
	if cfg.TrimInterval <= 0 {
		cfg.TrimInterval = time.Minute
	}
	if cfg.SpaceReserve <= 0 {
		cfg.SpaceReserve = DefaultSpaceReserve
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("janus-%d", cfg.ID)
	}
	if cfg.PeerURL == "" {
		if a, ok := cfg.Peers[cfg.ID]; ok {
			cfg.PeerURL = "http://" + a
		} else if a, ok := cfg.Observers[cfg.ID]; ok {
			cfg.PeerURL = "http://" + a
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	m := &Member{cfg: cfg, log: cfg.Logger, quota: quotaBytes(cfg.QuotaBackendBytes), disk: diskspace.NewGauge(cfg.DataDir)}
	ref, err := m.openState()
	if err != nil {
		return nil, err
	}
	m.state = ref
	if err := m.loadAlarms(ref); err != nil {
		ref.st.Close()
		return nil, fmt.Errorf("server: load alarms: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.checker = newCorruptChecker(ctx, m)
	m.hub = core.NewHub(history{ref.st}, ref.st.Rev(), 0)
	m.lessor = newLessor(cfg.Clock, cfg.MinLeaseTTL, m.proposeAsLeader, cfg.Logger.With("component", "lessor"))
	if err := m.lessor.load(ref.st); err != nil {
		cancel()
		ref.st.Close()
		return nil, fmt.Errorf("server: load leases: %w", err)
	}
	m.reaper = newReaper(cfg.Clock, func(ctx context.Context) (core.ReadView, error) { return m.Read(ctx, 0) },
		m.proposeAsLeader, cfg.Logger.With("component", "reaper"))
	if err := m.reaper.load(ref.st); err != nil {
		cancel()
		m.hub.Close()
		ref.st.Close()
		return nil, fmt.Errorf("server: load reaper: %w", err)
	}
	m.zab, err = zab.Open(zab.Config{
		Dir:               filepath.Join(cfg.DataDir, "log"),
		Logger:            cfg.Logger.With("component", "zab"),
		Clock:             cfg.Clock,
		TrimInterval:      cfg.TrimInterval,
		ID:                cfg.ID,
		Peers:             cfg.Peers,
		Observers:         cfg.Observers,
		Join:              cfg.Join,
		Transport:         cfg.Transport,
		PeerTLS:           cfg.PeerTLS,
		ElectionTimeout:   cfg.ElectionTimeout,
		HeartbeatInterval: cfg.HeartbeatInterval,
		MaxDiffEntries:    cfg.MaxDiffEntries,
		MaxEntrySize:      core.MaxOpBytes,
		CheckSpace:        m.checkSpace,
		Observer:          cfg.Observer,
	}, &stateMachine{m: m})
	if err != nil {
		cancel()
		m.hub.Close()
		ref.st.Close()
		return nil, fmt.Errorf("server: open log: %w", err)
	}
	m.zab.SetLeaderHandler(m.serveLeaderCall)
	m.checker.running.Store(true)
	m.bg.Add(3)
	go func() {
		defer m.bg.Done()
		m.followRoles(ctx)
	}()
	if !m.single() {
		m.bg.Add(1)
		go func() {
			defer m.bg.Done()
			m.publishSelf(ctx, cmp.Or(cfg.publishEvery, publishInterval))
		}()
	}
	go func() {
		defer m.bg.Done()
		m.runReclaim(ctx, cfg.ReclaimInterval)
	}()
	go func() {
		defer m.bg.Done()
		m.checker.run()
	}()
	if cfg.AutoCompaction.Mode != "" {
		ticks := cfg.compactTicks
		if ticks == nil {
			t := time.NewTicker(cfg.AutoCompaction.interval())
			ticks = t.C
			context.AfterFunc(ctx, t.Stop)
		}
		m.bg.Add(1)
		go func() {
			defer m.bg.Done()
			m.runCompactor(ctx, ticks)
		}()
	}
	return m, nil
}

// Close stops the member: the lessor, the log, the hub, then the state.
func (m *Member) Close() error {
	m.cancel()
	errLog := m.zab.Close()
	m.bg.Wait()
	m.checker.wg.Wait()
	m.mu.Lock()
	hub, ref := m.hub, m.state
	m.mu.Unlock()
	hub.Close()
	ref.views.Wait()
	errStore := ref.st.Close()
	return errors.Join(errLog, errStore)
}

// Done is closed once the member has stopped applying the log: after
// Close, or after an I/O or apply failure, which Err then returns.
func (m *Member) Done() <-chan struct{} { return m.zab.Done() }

// Err returns the failure that stopped the member, or nil while it runs
// and after a clean Close.
func (m *Member) Err() error { return m.zab.Err() }

// Dirs returns the directory of the state store in use and the log's
// directory, which ZooKeeper's conf and dirs report as its dataDir and
// dataLogDir.
func (m *Member) Dirs() (state, log string) {
	ref, _ := m.current()
	return filepath.Join(m.cfg.DataDir, ref.dir), filepath.Join(m.cfg.DataDir, "log")
}

// current returns the state and hub in use.
func (m *Member) current() (*stateRef, *core.Hub) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.state, m.hub
}

// stateMachine is what zab applies committed entries to. zab applies from
// one goroutine, so it reads m.state without holding a view; Sync runs
// beside it.
type stateMachine struct{ m *Member }

func (s *stateMachine) Apply(entries []zab.Entry) ([]any, error) {
	return s.ApplyWhen(entries, nil)
}

// ApplyWhen lets a single member write entries into the store while its
// log flushes them: the store publishes them, and the hub and the lessor
// learn of them, only after durable returns nil.
func (s *stateMachine) ApplyWhen(entries []zab.Entry, durable func() error) ([]any, error) {
	if fault := s.m.cfg.ApplyFault; fault != nil && len(entries) > 0 {
		if err := fault(entries[0].Index); err != nil {
			return nil, fmt.Errorf("server: apply entry %d: %w", entries[0].Index, err)
		}
	}
	m := s.m
	ces := make([]core.Entry, len(entries))
	for i, e := range entries {
		if e.Kind == zab.EntryMembership {
			// zab's own configuration entry: nothing for the tree (an
			// empty op changes nothing), but its index is applied.
			ces[i] = core.Entry{Index: e.Index, Time: e.Time}
			continue
		}
		var err error
		ces[i], err = core.LogEntry(e.Index, e.Time, e.Data)
		if err != nil {
			// Every member decodes the same bytes and refuses them
			// alike: an entry no face would build stops no one.
			s.m.log.Warn("refusing undecodable entry", "index", e.Index, "bytes", len(e.Data), "err", err)
		}
		if m.cfg.tamper != nil {
			m.cfg.tamper(&ces[i])
		}
	}
	// A HashCheck ends the store's group, so that the state right after
	// it can be hashed exactly (see corruptChecker).
	out := make([]any, 0, len(ces))
	for len(ces) > 0 {
		n := 1 + slices.IndexFunc(ces, func(e core.Entry) bool { return e.Op.HashCheck != nil })
		if n == 0 {
			n = len(ces)
		}
		seg := ces[:n]
		ces = ces[n:]
		ref, hub := m.current()
		start, waited := time.Now(), time.Duration(0)
		ready := durable
		if ready != nil {
			// The wait for the log's flush is the log's time, not apply's.
			ready = func() error {
				t := time.Now()
				defer func() { waited = time.Since(t) }()
				return durable()
			}
		}
		results, batches, err := ref.st.ApplyWhen(seg, ready)
		if err != nil {
			return nil, err
		}
		if took := time.Since(start) - waited; took > slowApplyWarning {
			// etcd's warning, with its fields, so that the same alert fires.
			m.log.Warn("apply request took too long", "took", took, "expected-duration", slowApplyWarning,
				"prefix", "", "request", fmt.Sprintf("entries %d-%d", seg[0].Index, seg[len(seg)-1].Index))
			m.counts.slowApplies.Add(1)
		}
		durable = nil // it covered every entry handed over
		for _, b := range batches {
			if b.Changed && int(b.Origin) < len(m.counts.writes) {
				m.counts.writes[b.Origin].Add(1)
			}
		}
		hub.Publish(batches)
		m.lessor.observe(seg, results)
		m.reaper.candidates.observe(batches)
		alarmsBefore := m.replicatedAlarms()
		if slices.ContainsFunc(seg, func(e core.Entry) bool { return e.Op.Alarm != nil || e.Op.Auth != nil }) {
			if err := m.loadAlarms(ref); err != nil {
				return nil, fmt.Errorf("server: read alarms and auth: %w", err)
			}
		}
		m.checker.applied(ref, seg, results, alarmsBefore)
		m.cfg.Observer.Applied(len(seg), time.Since(start)-waited)
		for _, r := range results {
			out = append(out, r)
		}
	}
	for i, e := range entries {
		if e.Kind == zab.EntryMembership {
			out[i] = nil
		}
	}
	return out, nil
}

func (s *stateMachine) AppliedIndex() uint64 {
	ref, _ := s.m.current()
	return ref.st.AppliedIndex()
}

// Sync syncs the current store. A restore from a snapshot may replace it
// meanwhile: the old one is then closed, and the new one, which the
// restore made durable, is synced instead.
func (s *stateMachine) Sync() (uint64, error) {
	for {
		ref, _ := s.m.current()
		index, err := ref.st.Sync()
		if errors.Is(err, store.ErrClosed) {
			if now, _ := s.m.current(); now != ref {
				continue
			}
		}
		return index, err
	}
}

// Ceiling and SkipTo implement zab.Skipper (see store.Store.Ceiling).
func (s *stateMachine) Ceiling() uint64 {
	ref, _ := s.m.current()
	return ref.st.Ceiling()
}

func (s *stateMachine) SkipTo(index uint64) error {
	ref, _ := s.m.current()
	return ref.st.SkipTo(index)
}

// slowApplyWarning is how long applying a group may take before it is
// logged, etcd's expected duration for applying a request.
const slowApplyWarning = 100 * time.Millisecond

// history adapts the store's event log to the hub.
type history struct{ st *store.Store }

func (h history) Events(from, to int64) ([]core.RevEvents, error) {
	evs, err := h.st.Events(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]core.RevEvents, len(evs))
	for i, e := range evs {
		out[i] = core.RevEvents{Rev: e.Rev, Events: e.Events, Origin: e.Origin}
	}
	return out, nil
}

// clusterErr turns zab's ensemble errors into the core errors the faces
// map to their protocols' "no leader" and "too large" answers.
func clusterErr(what string, err error) error {
	switch {
	case errors.Is(err, zab.ErrEntryTooLarge):
		return fmt.Errorf("%s: %w: %w", what, &core.Error{Code: core.CodeTooLarge}, err)
	case errors.Is(err, zab.ErrNoLeader), errors.Is(err, zab.ErrRemoved):
		// A removed member has no leader for good: the client goes on
		// with another member, as from one without a leader.
		return fmt.Errorf("%s: %w", what, core.ErrNoLeader)
	case errors.Is(err, zab.ErrLeaderChanged):
		return fmt.Errorf("%s: %w", what, core.ErrLeaderChanged)
	case errors.Is(err, zab.ErrNoSpace):
		return fmt.Errorf("%s: %w: %w", what, core.ErrNoSpace, err)
	case errors.Is(err, zab.ErrStopped):
		return fmt.Errorf("%s: %w: %w", what, core.ErrStopped, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Propose implements core.Backend. A follower forwards the op to the
// leader and answers once it has applied the commit itself, so the caller
// reads its own write on this member.
func (m *Member) Propose(ctx context.Context, op *core.Op) (*core.Result, error) {
	if err := m.admit(ctx, op); err != nil {
		return nil, fmt.Errorf("propose: %w", err)
	}
	return m.proposeLogged(ctx, op)
}

// propose is Propose for the member's own ops (lease expiry, corruption
// checks), which a member refusing clients still makes: they do not come
// from its damaged state. They are logged as OriginMember.
func (m *Member) propose(ctx context.Context, op *core.Op) (*core.Result, error) {
	own := *op
	own.Origin = core.OriginMember
	return m.proposeLogged(ctx, &own)
}

// proposeLogged puts op in the log as it is and waits for its result.
func (m *Member) proposeLogged(ctx context.Context, op *core.Op) (*core.Result, error) {
	r, err := m.zab.Propose(ctx, core.EncodeOp(op))
	if err != nil {
		m.counts.proposalsFailed.Add(1)
		return nil, clusterErr("propose", err)
	}
	return r.(*core.Result), nil
}

// proposeAsLeader proposes op only while this member leads in epoch (see
// zab's SubmitAsLeader): for decisions that one leadership's own clock
// made. They are the member's own ops, logged as OriginMember.
func (m *Member) proposeAsLeader(ctx context.Context, epoch uint32, op *core.Op) (*core.Result, error) {
	own := *op
	own.Origin = core.OriginMember
	p, err := m.zab.SubmitAsLeader(ctx, epoch, core.EncodeOp(&own))
	if err != nil {
		m.counts.proposalsFailed.Add(1)
		return nil, clusterErr("propose as leader", err)
	}
	return pending{p, m}.Wait(ctx)
}

// readable says why clients may not read this member's state: a CORRUPT
// alarm names it, or it stopped applying the log (its state no longer
// follows it); nil otherwise.
func (m *Member) readable() error {
	if m.Corrupt() {
		return core.ErrCorrupt
	}
	if err := m.zab.Err(); err != nil {
		return fmt.Errorf("%w: %w", core.ErrStopped, err)
	}
	return nil
}

// Rev implements core.Backend: the latest applied revision, without the
// cost of a view.
func (m *Member) Rev() (int64, error) {
	if err := m.readable(); err != nil {
		return 0, fmt.Errorf("rev: %w", err)
	}
	ref, _ := m.current()
	return ref.st.Rev(), nil
}

// Census implements core.Backend: the store keeps the counts as it
// applies, so monitoring reads them without walking the state.
func (m *Member) Census() (core.Census, error) {
	if err := m.readable(); err != nil {
		return core.Census{}, fmt.Errorf("census: %w", err)
	}
	ref, _ := m.current()
	return ref.st.Census(), nil
}

// Read implements core.Backend: the local replica's state, which a
// follower may hold a little behind the leader (Linearize first for a
// linearizable read).
func (m *Member) Read(ctx context.Context, rev int64) (core.ReadView, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := m.readable(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	m.mu.RLock()
	ref := m.state
	ref.views.Add(1)
	m.mu.RUnlock()
	var v core.ReadView
	var err error
	if rev <= 0 {
		v, err = ref.st.Latest()
	} else {
		v, err = ref.st.At(rev)
	}
	if err != nil {
		ref.views.Done()
		return nil, err
	}
	return &view{ReadView: v, ref: ref}, nil
}

// view releases its hold on the state it reads when closed, so a restore
// can retire the old state once no reader is left.
type view struct {
	core.ReadView
	ref    *stateRef
	closed atomic.Bool // not a sync.Once: its slow path, a mutex, is every view's
}

func (v *view) Close() {
	if v.closed.Swap(true) {
		return
	}
	v.ReadView.Close()
	v.ref.views.Done()
}

// Linearize implements core.Backend: it learns the leader's commit index
// (the leader confirming with a quorum that it still leads) and waits
// until this member has applied it.
func (m *Member) Linearize(ctx context.Context) error {
	if m.Corrupt() {
		return fmt.Errorf("read index: %w", core.ErrCorrupt)
	}
	idx, err := m.zab.ReadIndex(ctx)
	if err != nil {
		return clusterErr("read index", err)
	}
	if err := m.zab.WaitApplied(ctx, idx); err != nil {
		return clusterErr(fmt.Sprintf("wait applied %d", idx), err)
	}
	return nil
}

// Watch implements core.Backend.
func (m *Member) Watch(rev int64) (*core.Subscription, error) {
	if m.Corrupt() {
		return nil, fmt.Errorf("watch: %w", core.ErrCorrupt)
	}
	_, hub := m.current()
	return hub.Subscribe(rev)
}

// Status implements core.Backend.
func (m *Member) Status() core.Status {
	zs := m.zab.Status()
	ref, _ := m.current()
	st, err := ref.st.Status()
	if err != nil {
		m.log.Warn("store status", "err", err)
	}
	// A single member leads from the moment it opens (it is the one voter
	// of its ensemble); once it has grown, it may not.
	leader := zs.LeaderID
	return core.Status{
		ClusterID:    clusterID(m.cfg),
		MemberID:     m.cfg.ID,
		LeaderID:     leader,
		Epoch:        uint64(zs.Epoch),
		AppliedIndex: zs.AppliedIndex,
		CommitIndex:  zs.CommittedIndex,
		Rev:          st.Rev,
		CompactRev:   st.CompactRev,
		DBSize:       st.DBSize,
		QuotaBytes:   m.quota,
		Members:      m.statusMembers(leader),
		Err:          m.zab.Err(),
		Alarms:       alarmNames(m.Alarms()),
		Corrupt:      m.Corrupt(),
	}
}

// statusMembers lists the active configuration for Status: the starting
// one as members() always showed it, a later one as Cluster does.
func (m *Member) statusMembers(leader uint64) []core.ClusterMember {
	if active, _ := m.zab.Membership(); active.Version != 0 {
		return m.cluster(leader).Members
	}
	return m.members(leader)
}

// members lists the starting configuration from the flags, voters then
// observers, by ID.
func (m *Member) members(leader uint64) []core.ClusterMember {
	if len(m.cfg.Peers) == 0 && len(m.cfg.Observers) == 0 {
		return []core.ClusterMember{{ID: m.cfg.ID, Name: m.cfg.Name, PeerURL: m.cfg.PeerURL, EtcdURL: m.cfg.EtcdURL, ZKAddr: m.cfg.ZKAddr, IsLeader: true}}
	}
	var out []core.ClusterMember
	for _, group := range []struct {
		addrs    map[uint64]string
		observer bool
	}{{m.cfg.Peers, false}, {m.cfg.Observers, true}} {
		ids := make([]uint64, 0, len(group.addrs))
		for id := range group.addrs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			c := m.cfg.Clients[id]
			if id == m.cfg.ID {
				if m.cfg.EtcdURL != "" {
					c.EtcdURL = m.cfg.EtcdURL
				}
				if m.cfg.ZKAddr != "" {
					c.ZKAddr = m.cfg.ZKAddr
				}
			}
			out = append(out, core.ClusterMember{
				ID: id, Name: fmt.Sprintf("janus-%d", id), PeerURL: "http://" + group.addrs[id],
				EtcdURL: c.EtcdURL, ZKAddr: c.ZKAddr, ZKElectionAddr: c.ZKElectionAddr, IsLeader: id == leader, IsObserver: group.observer,
			})
			if id == m.cfg.ID {
				out[len(out)-1].Name = m.cfg.Name
			}
		}
	}
	return out
}

// clusterID is stable for a configuration: a hash of the member set (of
// this member's ID alone for a single member).
func clusterID(cfg MemberConfig) uint64 {
	desc := fmt.Sprintf("janus/%d", cfg.ID)
	if len(cfg.Peers) > 0 || len(cfg.Observers) > 0 {
		var parts []string
		for id, a := range cfg.Peers {
			parts = append(parts, fmt.Sprintf("%d=%s", id, a))
		}
		for id, a := range cfg.Observers {
			parts = append(parts, fmt.Sprintf("%d=%s/observer", id, a))
		}
		sort.Strings(parts)
		desc = fmt.Sprintf("janus/%v", parts)
	}
	h := uint64(14695981039346656037)
	for _, b := range []byte(desc) {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}
