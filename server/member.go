package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/store"
	"github.com/januskv/janus/zab"
)

// MemberConfig configures a Member. Zero values get the documented defaults.
type MemberConfig struct {
	// DataDir holds the log (DataDir/log) and the state (DataDir/state).
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
	// Name and the advertised client addresses, reported in Status.
	Name    string
	EtcdURL string
	ZKAddr  string
	PeerURL string
}

// Member is one running Janus server's replicated state: a core.Backend.
type Member struct {
	cfg    MemberConfig
	log    *slog.Logger
	store  *store.Store
	zab    *zab.Member
	hub    *core.Hub
	lessor *lessor

	cancel context.CancelFunc
	done   chan struct{}
}

var _ core.Backend = (*Member)(nil)

// OpenMember opens (or creates) the member's data and replays its log.
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
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.MinLeaseTTL <= 0 {
		cfg.MinLeaseTTL = 2
	}
	if cfg.LeaseCheckInterval <= 0 {
		cfg.LeaseCheckInterval = 100 * time.Millisecond
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("janus-%d", cfg.ID)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	st, err := store.Open(store.Config{Dir: filepath.Join(cfg.DataDir, "state"), Logger: cfg.Logger.With("component", "store")})
	if err != nil {
		return nil, fmt.Errorf("server: open state: %w", err)
	}
	m := &Member{cfg: cfg, log: cfg.Logger, store: st, done: make(chan struct{})}
	m.hub = core.NewHub(history{st}, st.Rev(), 0)
	m.lessor = newLessor(cfg.Clock, cfg.MinLeaseTTL, m.Propose, cfg.Logger.With("component", "lessor"))
	m.zab, err = zab.Open(zab.Config{
		Dir:          filepath.Join(cfg.DataDir, "log"),
		Logger:       cfg.Logger.With("component", "zab"),
		Clock:        cfg.Clock,
		TrimInterval: time.Minute,
	}, &stateMachine{m: m})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("server: open log: %w", err)
	}
	if err := m.lessor.load(st); err != nil {
		m.zab.Close()
		st.Close()
		return nil, fmt.Errorf("server: load leases: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		m.lessor.run(ctx, cfg.LeaseCheckInterval)
	}()
	return m, nil
}

// Close stops the member: the lessor, the log, the hub, then the state.
func (m *Member) Close() error {
	m.cancel()
	<-m.done
	errLog := m.zab.Close()
	m.hub.Close()
	errStore := m.store.Close()
	return errors.Join(errLog, errStore)
}

// stateMachine is what zab applies committed entries to.
type stateMachine struct{ m *Member }

func (s *stateMachine) Apply(entries []zab.Entry) ([]any, error) {
	ces := make([]core.Entry, len(entries))
	for i, e := range entries {
		op, err := core.DecodeOp(e.Data)
		if err != nil {
			return nil, fmt.Errorf("server: entry %d: %w", e.Index, err)
		}
		ces[i] = core.Entry{Index: e.Index, Time: e.Time, Op: *op}
	}
	results, batches, err := s.m.store.Apply(ces)
	if err != nil {
		return nil, err
	}
	s.m.hub.Publish(batches)
	s.m.lessor.observe(ces, results)
	out := make([]any, len(results))
	for i, r := range results {
		out[i] = r
	}
	return out, nil
}

func (s *stateMachine) AppliedIndex() uint64  { return s.m.store.AppliedIndex() }
func (s *stateMachine) Sync() (uint64, error) { return s.m.store.Sync() }

// history adapts the store's event log to the hub.
type history struct{ st *store.Store }

func (h history) Events(from, to int64) ([]core.RevEvents, error) {
	evs, err := h.st.Events(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]core.RevEvents, len(evs))
	for i, e := range evs {
		out[i] = core.RevEvents{Rev: e.Rev, Events: e.Events}
	}
	return out, nil
}

// Propose implements core.Backend.
func (m *Member) Propose(ctx context.Context, op *core.Op) (*core.Result, error) {
	r, err := m.zab.Propose(ctx, core.EncodeOp(op))
	if err != nil {
		return nil, fmt.Errorf("propose: %w", err)
	}
	return r.(*core.Result), nil
}

// Read implements core.Backend.
func (m *Member) Read(ctx context.Context, rev int64) (core.ReadView, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rev <= 0 {
		return m.store.Latest()
	}
	return m.store.At(rev)
}

// Linearize implements core.Backend. A single member acknowledges a write
// only after applying it, so its latest state already holds every write
// committed before the call.
func (m *Member) Linearize(ctx context.Context) error { return ctx.Err() }

// Watch implements core.Backend.
func (m *Member) Watch(rev int64) (*core.Subscription, error) { return m.hub.Subscribe(rev) }

// Leases implements core.Backend.
func (m *Member) Leases() core.Lessor { return m.lessor }

// Status implements core.Backend.
func (m *Member) Status() core.Status {
	zs := m.zab.Status()
	st, err := m.store.Status()
	if err != nil {
		m.log.Warn("store status", "err", err)
	}
	return core.Status{
		ClusterID:    clusterID(m.cfg),
		MemberID:     m.cfg.ID,
		LeaderID:     m.cfg.ID,
		Epoch:        uint64(zs.Epoch),
		AppliedIndex: zs.AppliedIndex,
		CommitIndex:  zs.CommittedIndex,
		Rev:          st.Rev,
		CompactRev:   st.CompactRev,
		DBSize:       st.DBSize,
		Members: []core.Member{{
			ID: m.cfg.ID, Name: m.cfg.Name, PeerURL: m.cfg.PeerURL, EtcdURL: m.cfg.EtcdURL, ZKAddr: m.cfg.ZKAddr, IsLeader: true,
		}},
	}
}

// clusterID is stable for a configuration: a hash of the member set.
func clusterID(cfg MemberConfig) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range []byte(fmt.Sprintf("janus/%d", cfg.ID)) {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}
