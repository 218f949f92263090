package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// metaFill prefixes the records rotateValueLog writes to fill the value
// log file Badger appends to; like the reclaim record they exist only
// while Reclaim runs, and snapshots and state hashes leave them out.
const metaFill = "fill"

// defragDiscardRatio is the share of garbage from which Reclaim (etcd's
// defrag, which rewrites etcd's whole database) has GC rewrite a value log
// file: any file that holds garbage gives it back.
const defragDiscardRatio = 0.01

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
func (s *Store) ReclaimValueLog() (int, error) { return s.reclaimValueLog(gcDiscardRatio) }

func (s *Store) reclaimValueLog(ratio float64) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	pin := txn.NewIterator(badger.IteratorOptions{})
	n, err := s.rewriteValueLogs(ratio)
	if n > 0 {
		if serr := s.syncLogs(); err == nil {
			err = serr
		}
	}
	pin.Close() // Badger deletes the rewritten files now, or when the last reader is done
	txn.Discard()
	return n, err
}

// rewriteValueLogs runs Badger's value log GC until it finds no file with
// ratio garbage to rewrite.
func (s *Store) rewriteValueLogs(ratio float64) (int, error) {
	n := 0
	for {
		if s.closed.Load() {
			return n, ErrClosed
		}
		err := s.db.RunValueLogGC(ratio)
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
// has Badger start a new value log file (rotateValueLog), compacts every
// table into one level (dropping what the discard timestamp allows) and
// then rewrites every value log file that holds garbage. Applying waits
// while the memtables are flushed; reads go on.
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
	_, err := s.reclaimValueLog(defragDiscardRatio)
	// The next size asked for is measured, not the one from before.
	s.sizeMu.Lock()
	s.sizeAt = time.Time{}
	s.sizeMu.Unlock()
	return err
}

// flushMemtables writes the reclaim record and drops it, which makes Badger
// flush every memtable, rotating the value log in between. It holds applyMu: Badger refuses writes while it
// drops a prefix, and a refused write would stop the member.
func (s *Store) flushMemtables() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.appliedTs == 0 {
		return nil // nothing was ever written
	}
	if err := s.writeMeta(metaKey(metaReclaim), nil); err != nil {
		return err
	}
	if err := s.rotateValueLog(); err != nil {
		return err
	}
	if err := s.db.DropPrefix(metaKey(metaReclaim)); err != nil {
		return fmt.Errorf("store: flush memtables: %w", err)
	}
	// The fill records are in tables now: dropping them there counts
	// their values as garbage of the file they fill, which GC then
	// rewrites (dropped from a memtable they would count as nothing).
	// Any that a crash left behind go too.
	if err := s.db.DropPrefix(metaKey(metaFill)); err != nil {
		return fmt.Errorf("store: drop fill records: %w", err)
	}
	return nil
}

// writeMeta writes one of Reclaim's records, at the applied record's own
// version: no new version appears, so the store's ceiling (Badger's newest
// version) stays where it is.
func (s *Store) writeMeta(key, v []byte) error {
	wb := s.db.NewManagedWriteBatch()
	if err := wb.SetEntryAt(badger.NewEntry(key, v), s.appliedTs); err != nil {
		wb.Cancel()
		return fmt.Errorf("store: write reclaim record: %w", err)
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store: write reclaim record: %w", err)
	}
	return nil
}

// valueLogMaxEntries is how many values Badger writes to a value log file
// before it starts the next one, when the file does not reach
// valueLogFileSize first: Badger's own default, so that files of small
// values (most records go to the value log, see maxValueThreshold) still
// grow to the file size rather than to a few hundred kilobytes.
const valueLogMaxEntries = 1_000_000

// fillValueMax is the largest value rotateValueLog writes per fill record.
const fillValueMax = 1 << 20

// rotateValueLog makes Badger start a new value log file, so that value
// log GC can rewrite the one it was appending to, which it never picks:
// without this, up to a file of garbage (64 MiB) would stay after Reclaim
// until the file filled or the store was reopened. Badger starts a new
// file once the one it appends to passes the value log file size, so fill
// records (metaFill) with values as large as a write batch allows (up to
// fillValueMax) are written until one appears: at most a file's worth,
// which flushMemtables drops. The caller holds applyMu.
func (s *Store) rotateValueLog() error {
	opts := s.db.Opts()
	dir := opts.Dir
	last, used, err := lastValueLog(dir)
	if err != nil || used <= vlogNothingWritten {
		return err // nothing to give back in the file
	}
	size := max(valueThreshold(opts.MemTableSize), min(fillValueMax, maxBatchBytes(opts.MemTableSize)-batchKeyRoom))
	filler := make([]byte, size)
	limit := int(opts.ValueLogFileSize/size) + 2
	for i := range limit {
		if err := s.writeMeta(binary.BigEndian.AppendUint32(metaKey(metaFill), uint32(i)), filler); err != nil {
			return err
		}
		now, _, err := lastValueLog(dir)
		if err != nil {
			return err
		}
		if now != last {
			return nil
		}
	}
	return fmt.Errorf("store: Badger did not start a new value log file after %d values of %d bytes", limit, size)
}

// vlogNothingWritten is the disk space of a value log file that holds no
// value: its header, in the first block.
const vlogNothingWritten = 4096

// lastValueLog names the newest value log file in dir, which Badger
// appends to, and the disk space it takes.
func lastValueLog(dir string) (string, int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil || len(files) == 0 {
		return "", 0, err
	}
	slices.Sort(files) // fixed-width file ids
	last := files[len(files)-1]
	info, err := os.Stat(last)
	if err != nil {
		return "", 0, fmt.Errorf("store: value log: %w", err)
	}
	return last, diskUsage(info), nil
}
