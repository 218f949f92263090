package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
)

// A crash of the process keeps the page cache, and with it everything
// Badger wrote: the memtable logs replay up to the first record the crash
// cut, and the applied index Badger kept implies every group up to it (see
// Store.write). A crash of the machine keeps only what was flushed to disk,
// and Badger flushes its memtable logs only when asked (Sync) or when a
// memtable becomes a table. The kernel writes dirty pages back in any
// order, so the applied index Badger recovers after a power loss may sit in
// a newer memtable log whose pages reached the disk while an older log lost
// records of a group below it.
//
// So the store keeps, in a small file of its own beside Badger's, the
// applied index Sync last made durable (every memtable log and value log
// file and the directory fsynced first), and the boot of the system that
// opened the store. Open trusts Badger's applied index when the store was
// closed cleanly or the system has not rebooted since it was opened (at most
// the process crashed); otherwise the machine stopped with the store open,
// and the store goes back to the durable index: every record of every group
// up to it is on disk, records above it are invisible to every read (reads
// are at or below the applied index), and replaying the consensus log from
// there rewrites them (see docs/design.md for why that is idempotent). The
// log is never trimmed above what Sync returned, so the entries are there.
// Badger's discard timestamp is kept at or below the durable index, so that
// its compaction never drops a version a read at the durable index needs.
//
// Linux names each boot (/proc/sys/kernel/random/boot_id). Where it cannot
// be read the store cannot tell a machine crash from a process crash and
// trusts Badger's applied index, as before this file existed.

// durableFile names the store's own file in the Badger directory.
const durableFile = "JANUS-DURABLE"

var durableMagic = [4]byte{'j', 'd', 'u', '1'}

// durableState is what durableFile holds.
type durableState struct {
	// index is the highest applied index whose groups are all on disk.
	index uint64
	// boot names the boot of the system that last opened the store.
	boot string
	// clean says the store was closed since it was last opened.
	clean bool
}

func (d durableState) encode() []byte {
	b := append([]byte(nil), durableMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, d.index)
	clean := byte(0)
	if d.clean {
		clean = 1
	}
	b = append(b, clean)
	b = binary.AppendUvarint(b, uint64(len(d.boot)))
	b = append(b, d.boot...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeDurable(b []byte) (durableState, error) {
	bad := func(why string) (durableState, error) {
		return durableState{}, fmt.Errorf("store: %s is damaged: %s", durableFile, why)
	}
	if len(b) < len(durableMagic)+8+1+1+4 {
		return bad("too short")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return bad("checksum mismatch")
	}
	if !bytes.Equal(body[:4], durableMagic[:]) {
		return bad("bad magic")
	}
	d := durableState{index: binary.BigEndian.Uint64(body[4:12]), clean: body[12] == 1}
	n, k := binary.Uvarint(body[13:])
	if k <= 0 || uint64(len(body)-13-k) != n {
		return bad("bad boot id length")
	}
	d.boot = string(body[13+k:])
	return d, nil
}

// readDurable reads durableFile from dir; ok is false when there is none.
func readDurable(dir string) (d durableState, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, durableFile))
	if errors.Is(err, fs.ErrNotExist) {
		return durableState{}, false, nil
	}
	if err != nil {
		return durableState{}, false, fmt.Errorf("store: read %s: %w", durableFile, err)
	}
	d, err = decodeDurable(b)
	return d, err == nil, err
}

// writeDurable replaces durableFile in dir durably: a crash leaves the old
// contents or the new.
func writeDurable(dir string, d durableState) error {
	tmp := filepath.Join(dir, durableFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("store: write %s: %w", durableFile, err)
	}
	_, err = f.Write(d.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, durableFile))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("store: write %s: %w", durableFile, err)
	}
	return nil
}

// syncLogs is syncFiles on the store's directory, and tells a test that
// set onFilesSynced.
func (s *Store) syncLogs() error {
	if err := syncFiles(s.db.Opts().Dir); err != nil {
		return err
	}
	if s.onFilesSynced != nil {
		s.onFilesSynced()
	}
	return nil
}

// syncFiles fsyncs every memtable log and value log file in dir, then dir
// itself. Badger's own Sync covers only the active memtable's log and the
// value log it writes to; memtables waiting to become tables have logs
// nobody flushed. A file that vanishes meanwhile was a memtable Badger has
// turned into a table, which it flushes before removing the log.
func syncFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".mem") && !strings.HasSuffix(name, ".vlog") {
			continue
		}
		// fsync on any descriptor of a file writes back its dirty pages,
		// those Badger dirtied through its memory map included.
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: sync %s: %w", name, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("store: sync %s: %w", name, err)
		}
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: sync directory: %w", err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("store: sync directory: %w", err)
	}
	return nil
}

// bootIDFile names the current boot on Linux.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// bootID names the running boot of the system, "" where it cannot tell.
func bootID() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// recoverDurable runs at Open, before load: it decides whether Badger's
// applied index can be trusted (see the comment at the top of this file)
// and, if not, makes Badger's applied index the durable one. It then
// records this boot in durableFile, the store no longer closed.
func (s *Store) recoverDurable(boot string) error {
	dir := s.db.Opts().Dir
	prev, ok, err := readDurable(dir)
	if err != nil {
		return err
	}
	applied, err := s.badgerApplied()
	if err != nil {
		return err
	}
	switch {
	case !ok:
		// A new store, or one written before the file existed: nothing
		// says what a machine crash lost, so Badger's applied index is
		// taken as it is, and made durable before it is recorded so.
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("store: sync badger: %w", err)
		}
		if err := s.syncLogs(); err != nil {
			return err
		}
		prev.index = applied
	case applied < prev.index:
		return fmt.Errorf("store: Badger's applied index %d is below the durable index %d: synced writes are lost", applied, prev.index)
	case applied == prev.index, prev.clean, boot != "" && prev.boot == boot:
		// At most the process stopped since the store was opened: the
		// page cache kept every write, and Badger's applied index is
		// whole.
	default:
		s.log.Warn("the system stopped with the store open; going back to the last durable applied index",
			"badger_applied", applied, "durable", prev.index)
		// The applied index record at Badger's newest version is read
		// on open: overwriting it (at that version, so that nothing
		// older shadows it) makes the durable index the applied one,
		// and the sync keeps a later crash from undoing that.
		wb := s.db.NewManagedWriteBatch()
		if err := wb.SetEntryAt(badger.NewEntry(metaKey(metaApplied), encodeUint64(prev.index)), applied); err != nil {
			wb.Cancel()
			return fmt.Errorf("store: reset applied index to %d: %w", prev.index, err)
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("store: reset applied index to %d: %w", prev.index, err)
		}
		s.appliedTs = max(s.appliedTs, applied)
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("store: sync badger: %w", err)
		}
		if err := s.syncLogs(); err != nil {
			return err
		}
	}
	s.durable = durableState{index: prev.index, boot: boot}
	if err := writeDurable(dir, s.durable); err != nil {
		return err
	}
	s.hist.setDurable(prev.index)
	return nil
}

// syncLocked makes every group up to applied durable and records it so.
// The caller holds applyMu and has written applied's groups.
func (s *Store) syncLocked(applied uint64) error {
	if err := s.syncBadger(); err != nil {
		return err
	}
	return s.recordDurable(applied)
}

// syncBadger fsyncs Badger's memtable and value logs: every group written
// before it was called is then on disk. The caller holds applyMu or syncMu,
// so that Badger is neither closed nor wiped meanwhile.
func (s *Store) syncBadger() error {
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("store: sync badger: %w", err)
	}
	return s.syncLogs()
}

// recordDurable records applied, whose groups the caller has fsynced, as
// the durable index, unless one at least as high is recorded already. The
// caller holds applyMu.
func (s *Store) recordDurable(applied uint64) error {
	if applied <= s.durable.index {
		return nil
	}
	d := s.durable
	d.index = applied
	if err := writeDurable(s.db.Opts().Dir, d); err != nil {
		return err
	}
	s.durable = d
	s.hist.setDurable(applied)
	return nil
}

// Ceiling returns the highest version Badger held when the store was
// opened (at least the applied index): records a crash left above the
// applied index reach at most up to it. Replaying the entries that wrote
// them rewrites them; if those entries are gone (a single member's log can
// lose, to a power loss, a group Badger had already written while the log
// flushed it), new entries at those indexes would not, and the caller must
// SkipTo the ceiling instead.
func (s *Store) Ceiling() uint64 {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return max(s.ceiling, s.state.Load().applied)
}

// SkipTo declares that no entries exist between the applied index and
// index, which must be at least Ceiling: every record above the applied
// index is rewritten, at its own version, to what the applied index shows
// (a delete where it shows nothing), so that a read at any index up to
// index sees the state at the applied index; then index becomes the
// applied index, durably. The next entry applied must be above index.
func (s *Store) SkipTo(index uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	applied := s.state.Load().applied
	if index <= applied {
		return nil
	}
	if index < s.ceiling {
		return fmt.Errorf("store: skip to %d, below the %d Badger holds writes for", index, s.ceiling)
	}
	// Every version above the applied index, key by key (an iterator over
	// all versions returns a key's versions one after the other).
	type stray struct {
		key      []byte
		versions []uint64
	}
	var strays []stray
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	it := txn.NewIterator(badger.IteratorOptions{AllVersions: true, SinceTs: applied})
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if n := len(strays); n > 0 && bytes.Equal(strays[n-1].key, item.Key()) {
			strays[n-1].versions = append(strays[n-1].versions, item.Version())
			continue
		}
		strays = append(strays, stray{key: item.KeyCopy(nil), versions: []uint64{item.Version()}})
	}
	it.Close()
	txn.Discard()
	at := reader{txn: s.db.NewTransactionAt(applied, false)}
	defer at.txn.Discard()
	wb := s.db.NewManagedWriteBatch()
	for _, st := range strays {
		if bytes.Equal(st.key, metaKey(metaApplied)) {
			continue // written last, below
		}
		val, err := at.get(st.key)
		if err != nil {
			wb.Cancel()
			return err
		}
		for _, v := range st.versions {
			if val == nil {
				err = wb.DeleteAt(st.key, v)
			} else {
				err = wb.SetEntryAt(badger.NewEntry(st.key, val), v)
			}
			if err != nil {
				wb.Cancel()
				return fmt.Errorf("store: skip to %d: rewrite %q at %d: %w", index, st.key, v, err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store: skip to %d: %w", index, err)
	}
	if err := s.writeApplied(index); err != nil {
		return err
	}
	if err := s.syncLocked(index); err != nil {
		return err
	}
	s.log.Warn("store skipped indexes no entry will fill", "from", applied+1, "to", index, "records_rewritten", len(strays))
	return s.load()
}

// removeEmptyLogs removes the memtable and value log files of length zero
// from dir before Badger opens it: Badger refuses to open such a file ("Create
// a new file") and the store would never open again. A crash leaves one
// where Badger deletes a log (a memtable turned into a table, a value log
// file GC rewrote), which it truncates to nothing before it unlinks it, or
// creates one, between creating the file and sizing it. Either way it holds
// no record, and whatever a record pointed into it for was moved before
// the deletion began (see "The value log" in doc.go).
func removeEmptyLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: list %s: %w", dir, err)
	}
	removed := false
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".mem") && !strings.HasSuffix(name, ".vlog") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: stat %s: %w", name, err)
		}
		if info.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("store: remove empty log %s: %w", name, err)
		}
		log.Warn("removed an empty Badger log file a crash left behind", "file", name)
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}
