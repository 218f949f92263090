package store

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/januskv/janus/core"
)

// Config says where and how to open a Store.
type Config struct {
	// Dir is the Badger directory; it is created if missing.
	Dir string
	// Logger receives Badger's warnings and errors and the store's own
	// messages. Nil discards them.
	Logger *slog.Logger
	// MemTableSize and BlockCacheSize override the modest defaults below
	// when set (bytes).
	MemTableSize   int64
	BlockCacheSize int64
	// CacheSize is the memory, in bytes, the store may keep the latest node
	// and Dir records in so that neither Apply nor a read of the latest
	// state reads hot keys from Badger (see recordCache). 0 picks the default below; a negative size turns the
	// cache off.
	CacheSize int64
	// CloseTimeout bounds how long Close waits for Badger to flush its
	// memtables when Badger has not reported that it cannot (default
	// 30 s; see Close).
	CloseTimeout time.Duration
	// OnCommit, if set, is told how long each group's Badger write took
	// (etcd's backend commit duration). It must not block.
	OnCommit func(took time.Duration)

	// valueLogFileSize overrides the size of Badger's value log files
	// (valueLogFileSize); tests set it small so that files rotate and
	// value log GC has files to rewrite.
	valueLogFileSize int64
	// tuneBadger, if set, changes Badger's options last; only benchmarks
	// set it, to compare options on the same workload.
	tuneBadger func(badger.Options) badger.Options
	// writebackEvery and writebackKick override the writeback loop's
	// interval and its way to start writeback (see writeback); tests
	// set them.
	writebackEvery time.Duration
	writebackKick  func(path string) error
}

const (
	// defaultMemTableSize sets how often Badger flushes a memtable into a
	// level-0 table, and so how often compaction rewrites the tables the
	// flushes overlap; with writes spread over the keyspace that is most
	// of them. After 40 s of puts, 32 MiB instead of 16 MiB cut the
	// server's CPU per put by a quarter and its p99 from 56 to 17 ms;
	// 64 MiB did no better and holds twice the memory.
	defaultMemTableSize   = 32 << 20
	defaultBlockCacheSize = 32 << 20
	// baseLevelSize is the size Badger lets level 1 reach before it
	// compacts it into level 2 (see Open).
	baseLevelSize = 64 << 20
	// defaultCacheSize holds about 40,000 nodes of 256-byte values in
	// one generation of the node cache, each with its decoded copy (about
	// 630 bytes an entry), so that a hot keyspace of that size is not
	// evicted by its own reads; 16 MiB held under 10,000 (see
	// TestDefaultCacheHoldsAHotKeyspace). The keys a busy workload keeps
	// reading or rewriting, not the whole keyspace.
	defaultCacheSize = 64 << 20
	// compactChunk bounds how many revisions' index and event records one
	// write of a compaction deletes.
	compactChunk = 4096
)

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("store: closed")

// ErrFlushStuck is returned by Close when it stopped waiting for Badger,
// which could not flush its memtables (see Close).
var ErrFlushStuck = errors.New("store: badger cannot flush its memtables")

// defaultCloseTimeout is Config.CloseTimeout's default.
const defaultCloseTimeout = 30 * time.Second

// Store is the Badger-backed, versioned state. Apply is called from one
// goroutine; every read method may be called from any number of goroutines
// at the same time as Apply.
type Store struct {
	db       *badger.DB
	log      *slog.Logger
	onCommit func(took time.Duration)
	// flushFailing is signalled when Badger reports a memtable flush that
	// failed: it then retries every second, forever, and its Close waits
	// for it.
	flushFailing chan struct{}
	closeTimeout time.Duration

	// applyMu makes Apply, RestoreSnapshot and Close exclusive. Readers
	// never take it.
	applyMu sync.Mutex
	// syncMu keeps Sync's fsyncs, which run without applyMu so that applies
	// go on beside them, apart from what closes Badger or replaces its
	// files: Close, RestoreSnapshot, SkipTo and flushMemtables take it too,
	// always before applyMu.
	syncMu sync.Mutex
	// state is what readers see: swapped only after the applied index that
	// it describes is in Badger.
	state atomic.Pointer[published]
	hist  *history
	// restoredRev is the revision a snapshot was restored at (0 if none);
	// owned by the applier.
	restoredRev int64
	closed      atomic.Bool
	// nodeCache and dirCache hold latest records for Apply and for readers
	// of the latest state; the applier moves them (see recordCache).
	nodeCache, dirCache *recordCache
	// writeback keeps the value log file Badger writes through a memory
	// map from piling up dirty pages; nil where the system offers no way.
	writeback *writeback

	// appliedTs is the newest version of the applied index record. It is
	// the index itself, except after Open went back to a durable index
	// below Badger's (see recoverDurable), which is written at Badger's
	// newest version so that nothing older shadows it: later records are
	// written at no lower a version, or the reset one would still be read
	// on the next open. Owned by the applier.
	appliedTs uint64

	// crashBeforeApplied makes Apply stop after writing a group's batches
	// and before recording the applied index, as a crash there would. Only
	// tests set it.
	crashBeforeApplied bool
	// onFilesSynced, if set, is called each time the store has fsynced
	// Badger's memtable and value logs: what a crash of the machine keeps
	// of them is at least what they held then. Only tests set it.
	onFilesSynced func()

	// durable is what durableFile says; owned by whoever holds applyMu.
	durable durableState
	// ceiling is the highest version Badger held at open (see Ceiling).
	ceiling uint64

	// sizeMu guards the cached size on disk and when it was measured.
	sizeMu sync.Mutex
	size   int64
	sizeAt time.Time
}

// published is one consistent point for readers.
type published struct {
	applied    uint64
	rev        int64
	compactRev int64
	// census counts the state at applied (see Store.Census).
	census core.Census
}

// Open opens (creating if needed) the store in cfg.Dir.
func Open(cfg Config) (*Store, error) {
	return open(cfg, bootID())
}

// open is Open on a system whose current boot is named boot; tests fake a
// reboot with it.
func open(cfg Config, boot string) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("store: no directory given")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	memTable := pick(cfg.MemTableSize, defaultMemTableSize)
	flushFailing := make(chan struct{}, 1)
	if err := removeEmptyLogs(cfg.Dir, log); err != nil {
		return nil, err
	}
	opts := badgerOptions(cfg.Dir, memTable).
		WithBlockCacheSize(pick(cfg.BlockCacheSize, defaultBlockCacheSize)).
		WithValueLogFileSize(pick(cfg.valueLogFileSize, valueLogFileSize)).
		WithLogger(badgerLogger{log: log, flushFailing: flushFailing})
	// Badger's default table sizes (doubling per level) are kept: tables
	// of BaseTableSize at every level cut the heap a bulk load peaks at
	// (compaction's table builders), but in the write benchmarks after a
	// few hundred thousand writes compaction took 29% of the server's CPU
	// instead of 4-6%, and write p99 doubled. The heap the builders leave
	// behind is returned once the server goes quiet (see main.go).
	//
	// Badger's level-0 thresholds (compact at 5 tables, stall writes at
	// 15) are kept too. Compacting at 10 (stall at 25) cut the CPU per put
	// by about a tenth in BenchmarkApplySustained (1M puts: 32.8 and 31.9
	// µs with 5, 29.8 and 28.6 with 10), since every level-0 compaction
	// merges the waiting tables with the whole base level; but a range of
	// 100 keys after 600,000 puts (BenchmarkRangeAfterWrites), which merges
	// every level-0 table, took 13.5 and 19.6 ms with 6 tables waiting
	// against 4.7 and 14.4 ms with 2, and reads are to stay at the wire's
	// ceiling.
	if cfg.tuneBadger != nil {
		opts = cfg.tuneBadger(opts)
	}
	db, err := badger.OpenManaged(opts)
	if err != nil {
		return nil, fmt.Errorf("store: open badger in %s: %w", cfg.Dir, err)
	}
	cache := cfg.CacheSize
	if cache == 0 {
		cache = defaultCacheSize
	}
	// Node records are bigger and more often read than Dir records.
	closeTimeout := cfg.CloseTimeout
	if closeTimeout <= 0 {
		closeTimeout = defaultCloseTimeout
	}
	s := &Store{db: db, log: log, onCommit: cfg.OnCommit, flushFailing: flushFailing, closeTimeout: closeTimeout, nodeCache: newRecordCache(cache * 3 / 4), dirCache: newRecordCache(cache / 4)}
	s.hist = newHistory(db.SetDiscardTs)
	if err := s.recoverDurable(boot); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.ceiling = db.MaxVersion()
	kick := cfg.writebackKick
	if kick == nil {
		kick = osWritebackKick()
	}
	every := cfg.writebackEvery
	if every <= 0 {
		every = writebackInterval
	}
	s.writeback = startWriteback(cfg.Dir, every, kick)
	return s, nil
}

// badgerOptions are the store's Badger options for a directory and a
// memtable size, without what Open takes from its Config (block cache,
// value log file size, logger). BenchmarkLayout opens Badger with them too.
func badgerOptions(dir string, memTable int64) badger.Options {
	return badger.DefaultOptions(dir).
		// The consensus log is the durability: after a crash it is replayed
		// from the applied index Badger kept, so Badger need not fsync.
		WithSyncWrites(false).
		// Versions above the discard timestamp are history; at or below it
		// only the newest version of a key is kept (see package doc).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false).
		// Badger's metrics are process-global expvars; the store reports
		// its own figures instead.
		WithMetricsEnabled(false).
		WithMemTableSize(memTable).
		WithValueThreshold(valueThreshold(memTable)).
		// Each memtable is an arena of its full size on the Go heap; writes
		// stall when this many wait to be flushed. Two saved one arena at
		// the peak of a bulk load but leave a single flush between a full
		// memtable and a stalled write, which is where write tails come
		// from on a busy machine.
		WithNumMemtables(3).
		WithValueLogMaxEntries(valueLogMaxEntries).
		// Badger's default base level (10 MiB) is smaller than one flushed
		// memtable, so nearly every level-0 compaction overflowed level 1
		// and a second compaction rewrote it into level 2. With 64 MiB,
		// BenchmarkApplySustained (1M puts over 10,000 keys) took 8-11%
		// less CPU per put in four paired runs (13.3, 14.2, 19.4 and 18.8
		// µs against 14.9, 15.8, 21.7 and 21.1; the machine slowed during
		// the runs, so compare pairs), with its slowest fiftieth of the
		// run 1.4-2.2x the median one instead of 2.1-4.2x; a range after
		// 600,000 puts (BenchmarkRangeAfterWrites) took 2.6 ms against
		// 3.0 ms. 32 and 128 MiB (one run each) kept the uneven stretches
		// (slowest fiftieth 3.1x and 5.5x the median).
		WithBaseLevelSize(baseLevelSize).
		// Two is the fewest Badger allows (zero stops compaction).
		WithNumCompactors(2).
		WithNumGoroutines(2)
}

// valueLogFileSize is the size of Badger's value log files, and so the
// largest value Badger stores: core.MaxRecordBytes stays below it.
const valueLogFileSize = 64 << 20

// maxValueThreshold is the size from which a record's value goes to
// Badger's value log instead of its LSM tree, where every memtable flush
// and compaction copies it again and the table builders hold it in memory;
// the tree then holds a pointer of a dozen bytes.
//
// First chosen for large values (64 KiB; with the bench tool, 8 clients,
// 100 keys, server CPU per operation at 32 / 64 / 128 KiB / 1 MiB: 100 KiB
// puts 2.0 / 2.0 / 3.8 / 3.5 ms, 1 MB puts 12.2 / 12.0 / 12.2 / 16.6 ms,
// RSS after 300 x 1 MB 528 / 657 / 617 / 1,487 MiB), it is now 128 bytes,
// so that ordinary records go there too: the versions a node's history
// keeps then cost compaction a pointer each, not a record.
// store.BenchmarkLayout (2M puts of 296-byte records over 10,000 keys, CPU
// per put with Badger's flushes and compactions): 7.5 µs against 14.4 µs
// with the records in the tree, and the slowest fiftieth of the run 2.3x
// the median one against 5.4x. End to end (bench tool, 100 clients, 256-byte
// values, Janus alone, two runs each alternated), create p99 14.5-15.5 ms
// against 42-50 ms, put p99.9 35-52 ms against 89-111 ms, with less CPU
// per write (docs/benchmarks.md, "Values in the value log"). Records under
// 128 bytes (empty znodes, small values, the event log, Dir records) stay
// in the tree, where a read is one lookup. The value log's space comes
// back through value log GC (ReclaimValueLog, Reclaim) once compaction
// drops versions; see "The value log" in doc.go for why crashes keep
// whole groups with values there.
const maxValueThreshold = 128

// batchKeyRoom is what a record's key can take of a Badger write batch:
// Badger's key limit, its version and metas.
const batchKeyRoom = 65000 + 64

// valueThreshold is the size from which a value goes to the value log
// rather than the LSM tree: maxValueThreshold, lower for small memtables.
// Badger refuses, for good, a record that does not fit a write batch (15%
// of a memtable) with its key and value: so the threshold leaves room for
// the longest key the store builds (core.MaxKeyBytes and its prefix),
// whatever the memtable size.
func valueThreshold(memTable int64) int64 {
	return max(1, min(maxValueThreshold, memTable/10, maxBatchBytes(memTable)-batchKeyRoom))
}

// maxBatchBytes is Badger's bound on one transaction (db.go).
func maxBatchBytes(memTable int64) int64 { return 15 * memTable / 100 }

func pick(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// badgerApplied reads the applied index record at its newest version, and
// remembers that version (see Store.appliedTs).
func (s *Store) badgerApplied() (uint64, error) {
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	item, err := txn.Get(metaKey(metaApplied))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read applied index: %w", err)
	}
	b, err := item.ValueCopy(nil)
	if err != nil {
		return 0, fmt.Errorf("store: read applied index: %w", err)
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("store: applied index record is %d bytes", len(b))
	}
	s.appliedTs = max(s.appliedTs, item.Version())
	return getUint64(b), nil
}

// load reads the applied index and what hangs on it, and publishes it.
func (s *Store) load() error {
	applied, err := s.badgerApplied()
	if err != nil {
		return err
	}
	r := reader{txn: s.db.NewTransactionAt(applied, false)}
	defer r.txn.Discard()
	meta, err := r.Meta()
	if err != nil {
		return fmt.Errorf("store: read meta at %d: %w", applied, err)
	}
	if b, err := r.get(metaKey(metaRestored)); err != nil {
		return err
	} else if b != nil {
		s.restoredRev = int64(getUint64(b))
	}
	readFloor, eventFloor := s.floorsFor(meta.CompactRev)
	want, err := discardFor(readFloor, r.revIndex)
	if err != nil {
		return err
	}
	s.hist.advance(readFloor, eventFloor, want)
	// The census is counted once here, by a walk of the whole state, and
	// kept up to date by every Apply after.
	census, err := core.CountCensus(r)
	if err != nil {
		return fmt.Errorf("store: count the state at %d: %w", applied, err)
	}
	s.nodeCache.reset(applied)
	s.dirCache.reset(applied)
	s.state.Store(&published{applied: applied, rev: meta.Rev, compactRev: meta.CompactRev, census: census})
	s.log.Debug("store opened", "applied", applied, "rev", meta.Rev, "compact_rev", meta.CompactRev)
	return nil
}

// floorsFor returns the oldest revision readable and the oldest whose events
// can be replayed, given core's compact revision.
func (s *Store) floorsFor(compactRev int64) (readFloor, eventFloor int64) {
	readFloor, eventFloor = compactRev, compactRev
	if s.restoredRev > 0 {
		readFloor = max(readFloor, s.restoredRev)
		eventFloor = max(eventFloor, s.restoredRev+1)
	}
	return readFloor, eventFloor
}

// discardFor returns Badger's discard timestamp for a read floor: one below
// the index that created the floor revision. Revision floor-1 then stays
// readable too, which is where Events reads the Prev of floor's events.
func discardFor(floor int64, indexOf func(int64) (uint64, bool, error)) (uint64, error) {
	if floor <= 1 {
		return 0, nil
	}
	idx, ok, err := indexOf(floor)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("store: no index recorded for revision %d", floor)
	}
	if idx == 0 {
		return 0, nil
	}
	return idx - 1, nil
}

// Close closes Badger and records the store closed, so that the next Open
// trusts its applied index even after a reboot. Views must be closed
// before.
//
// Badger's Close flushes its memtables into tables, and a flush that
// fails (its directory read-only or gone, no room for a table file) is
// retried every second for ever, so Close would never return and a
// SIGTERM would never end the process. Close stops waiting, with
// ErrFlushStuck, once Badger has reported a failed flush, or after
// Config.CloseTimeout; Badger's goroutines are then left behind for the
// process exit to end. That is as safe as a crash: the memtables' logs
// hold what was not flushed, the store is not recorded closed, and the
// consensus log replays every entry above the last Sync.
func (s *Store) Close() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	s.writeback.stopWriteback()
	dir := s.db.Opts().Dir
	closed := make(chan error, 1)
	go func() { closed <- s.db.Close() }()
	var err error
	select {
	case err = <-closed:
	case <-s.flushFailing:
		err = fmt.Errorf("%w (its directory is read-only, full or gone); leaving it, as a crash would", ErrFlushStuck)
	case <-time.After(s.closeTimeout):
		err = fmt.Errorf("%w within %v; leaving it, as a crash would", ErrFlushStuck, s.closeTimeout)
	}
	if err != nil {
		return fmt.Errorf("store: close badger: %w", err)
	}
	// Badger turned its memtables into tables as it closed; what is left
	// of its logs is flushed all the same.
	if err := syncFiles(dir); err != nil {
		return err
	}
	d := s.durable
	d.index, d.clean = s.state.Load().applied, true
	return writeDurable(dir, d)
}

// AppliedIndex returns the index of the last entry whose effects readers see.
func (s *Store) AppliedIndex() uint64 { return s.state.Load().applied }

// Rev returns the current revision.
func (s *Store) Rev() int64 { return s.state.Load().rev }

// Census returns the counts of the current state, without reading it: the
// store counts the state when it opens and keeps the counts as it applies.
func (s *Store) Census() core.Census { return s.state.Load().census }

// Latest returns a View of the current state.
func (s *Store) Latest() (*View, error) {
	return s.latest(s.state.Load())
}

func (s *Store) latest(st *published) (*View, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	pin, err := s.hist.pin(st.rev, false)
	if err != nil {
		return nil, err
	}
	return &View{
		reader: reader{txn: s.db.NewTransactionAt(st.applied, false)},
		rev:    st.rev,
		hist:   s.hist,
		pin:    pin,
		at:     st.applied,
		nodes:  s.nodeCache,
		dirs:   s.dirCache,
	}, nil
}

// At returns a View of the state at revision rev: core.ErrCompacted below
// the compact revision, core.ErrFutureRev above the current one, the latest
// state for rev <= 0.
func (s *Store) At(rev int64) (*View, error) {
	st := s.state.Load()
	switch {
	case rev <= 0 || rev == st.rev:
		return s.latest(st)
	case rev > st.rev:
		return nil, core.ErrFutureRev
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	pin, err := s.hist.pin(rev, false)
	if err != nil {
		return nil, err
	}
	// The state while rev was current ends just before the entry that
	// made the next revision, so a View at rev also shows the lease and
	// compaction changes made at rev, as the latest View would have then.
	lookup := reader{txn: s.db.NewTransactionAt(st.applied, false)}
	next, ok, err := lookup.revIndex(rev + 1)
	lookup.txn.Discard()
	if err == nil && !ok {
		err = fmt.Errorf("store: no index recorded for revision %d", rev+1)
	}
	if err != nil {
		s.hist.unpin(pin)
		return nil, err
	}
	// The caches answer at any index they have not moved below: a node
	// record is exact at every index, and a key a group wrote is a miss
	// for an index inside or before that group (see recordCache).
	return &View{
		reader: reader{txn: s.db.NewTransactionAt(next-1, false)},
		rev:    rev,
		hist:   s.hist,
		pin:    pin,
		at:     next - 1,
		nodes:  s.nodeCache,
		dirs:   s.dirCache,
	}, nil
}

// Status is what the store reports about itself.
type Status struct {
	// DBSize is the space the store's files take on disk, in bytes.
	DBSize int64
	Rev    int64
	// CompactRev is etcd's compact revision as the store's readers see
	// it: the oldest revision whose events it can replay. That is core's
	// compact revision, or, after a snapshot restore, the revision after
	// the snapshot's if higher (the snapshot holds no history, and an etcd
	// watch below the compact revision is answered as compacted, so that
	// its client lists again instead of missing events).
	CompactRev   int64
	AppliedIndex uint64
}

// Status returns the store's size and position.
func (s *Store) Status() (Status, error) {
	st := s.state.Load()
	size, err := s.diskSize()
	if err != nil {
		return Status{}, fmt.Errorf("store: size on disk: %w", err)
	}
	_, eventFloor := s.hist.floors()
	return Status{DBSize: size, Rev: st.rev, CompactRev: max(st.compactRev, eventFloor), AppliedIndex: st.applied}, nil
}

// diskSizeMaxAge bounds how stale a reported size may be. Walking the
// directory on every call would make frequent status calls (etcd response
// headers, metrics) cost a directory walk each.
const diskSizeMaxAge = time.Second

func (s *Store) diskSize() (int64, error) {
	s.sizeMu.Lock()
	defer s.sizeMu.Unlock()
	if !s.sizeAt.IsZero() && time.Since(s.sizeAt) < diskSizeMaxAge {
		return s.size, nil
	}
	size, err := dirSize(s.db.Opts().Dir)
	if err != nil {
		return 0, err
	}
	s.size, s.sizeAt = size, time.Now()
	return size, nil
}

// Sync makes everything applied so far durable and returns the applied
// index that the sync covers: the consensus log may be trimmed up to it.
// After a crash of the machine the store opens at this index or above it
// (see durable.go).
//
// Applies go on while Sync fsyncs Badger's logs (tens of milliseconds on a
// busy disk): it holds applyMu only to read the applied index, whose
// groups are then in the files, and to record that index durable once the
// fsyncs are done. What is applied meanwhile lies at higher versions,
// which the recorded index does not claim.
func (s *Store) Sync() (uint64, error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.applyMu.Lock()
	closed, applied := s.closed.Load(), s.state.Load().applied
	s.applyMu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	if err := s.syncBadger(); err != nil {
		return 0, err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.recordDurable(applied); err != nil {
		return 0, err
	}
	return applied, nil
}

// badgerLogger routes Badger's log lines into slog. Badger's info and debug
// chatter is dropped: only warnings and errors reach the log. A failed
// memtable flush is also signalled on flushFailing (see Close): Badger
// says so only in its log.
type badgerLogger struct {
	log          *slog.Logger
	flushFailing chan struct{}
}

// badgerFlushFailed starts Badger's log line for a memtable flush that
// failed and will be retried (db.go, flushMemtable).
const badgerFlushFailed = "error flushing memtable to disk"

func (l badgerLogger) Errorf(f string, args ...any) {
	msg := fmt.Sprintf(f, args...)
	if strings.HasPrefix(msg, badgerFlushFailed) {
		select {
		case l.flushFailing <- struct{}{}:
		default:
		}
	}
	l.log.Error(msg, "component", "badger")
}

func (l badgerLogger) Warningf(f string, args ...any) {
	l.log.Warn(fmt.Sprintf(f, args...), "component", "badger")
}

func (l badgerLogger) Infof(string, ...any)  {}
func (l badgerLogger) Debugf(string, ...any) {}
