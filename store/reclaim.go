package store

import (
	"errors"
	"fmt"
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Giving disk space back. Badger frees the space of deleted and compacted
// records in two places: its LSM compactions drop versions at or below the
// discard timestamp (see history.go) and count, per value log file, the
// bytes they dropped; value log GC then rewrites a file whose share of
// dropped bytes is high enough and deletes it. Badger runs LSM compactions
// on its own but never value log GC, so the member runs ReclaimValueLog
// now and then, and Reclaim (etcd's defrag) does everything at once.

// gcDiscardRatio is the share of a value log file that must be garbage for
// GC to rewrite it: Badger's recommended 0.5, so a rewrite at least halves
// what the file holds.
const gcDiscardRatio = 0.5

// metaReclaim names a record that exists only while Reclaim flushes the
// memtables: Badger flushes them on demand only when dropping a prefix that
// holds data, so Reclaim writes this record and drops it. Snapshots and
// state hashes leave it out (inSnapshot).
const metaReclaim = "reclaim"

// ReclaimValueLog rewrites value log files that are mostly garbage until
// none is left, and returns how many it rewrote. It runs beside Apply and
// reads.
//
// Badger moves a file's live values to the value log file it is writing,
// with their memtable log records, and then deletes the file; it fsyncs
// neither first (the store writes without SyncWrites). A crash of the
// machine could then keep the deletion and lose the moved values, whose
// versions lie at or below the durable index. So the rewrites run while an
// iterator is open, which makes Badger put off every deletion until the
// last iterator closes, and the iterator is closed only once the memtable
// and value logs are fsynced.
func (s *Store) ReclaimValueLog() (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	pin := txn.NewIterator(badger.IteratorOptions{})
	n, err := s.rewriteValueLogs()
	if n > 0 {
		if serr := s.syncLogs(); err == nil {
			err = serr
		}
	}
	pin.Close() // Badger deletes the rewritten files now, or when the last reader is done
	txn.Discard()
	return n, err
}

// rewriteValueLogs runs Badger's value log GC until it finds nothing to
// rewrite.
func (s *Store) rewriteValueLogs() (int, error) {
	n := 0
	for {
		if s.closed.Load() {
			return n, ErrClosed
		}
		err := s.db.RunValueLogGC(gcDiscardRatio)
		switch {
		case err == nil:
			n++
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			// Nothing worth rewriting, or a GC is already running.
			return n, nil
		default:
			return n, fmt.Errorf("store: value log GC: %w", err)
		}
	}
}

// Reclaim gives back all the space that deletes and compactions freed, as
// far as open readers allow: it makes the state durable (the discard
// timestamp never passes the durable index), flushes the memtables into
// tables (the deletes they hold would otherwise shadow nothing on disk),
// compacts every table into one level (dropping what the discard timestamp
// allows) and then rewrites the value log files that became garbage.
// Applying waits while the memtables are flushed; reads go on.
func (s *Store) Reclaim() error {
	if _, err := s.Sync(); err != nil {
		return err
	}
	if err := s.flushMemtables(); err != nil {
		return err
	}
	if err := s.db.Flatten(2); err != nil {
		return fmt.Errorf("store: flatten: %w", err)
	}
	_, err := s.ReclaimValueLog()
	// The next size asked for is measured, not the one from before.
	s.sizeMu.Lock()
	s.sizeAt = time.Time{}
	s.sizeMu.Unlock()
	return err
}

// flushMemtables writes the reclaim record and drops it, which makes Badger
// flush every memtable. It holds applyMu: Badger refuses writes while it
// drops a prefix, and a refused write would stop the member.
func (s *Store) flushMemtables() error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.appliedTs == 0 {
		return nil // nothing was ever written
	}
	key := metaKey(metaReclaim)
	// At the applied record's own version: no new version appears, so the
	// store's ceiling (Badger's newest version) stays where it is.
	wb := s.db.NewManagedWriteBatch()
	if err := wb.SetEntryAt(badger.NewEntry(key, nil), s.appliedTs); err != nil {
		wb.Cancel()
		return fmt.Errorf("store: write reclaim record: %w", err)
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store: write reclaim record: %w", err)
	}
	if err := s.db.DropPrefix(key); err != nil {
		return fmt.Errorf("store: flush memtables: %w", err)
	}
	return nil
}
