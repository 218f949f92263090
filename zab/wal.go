package zab

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// segment describes one segment file of the log.
type segment struct {
	first  uint64 // index of its first record
	last   uint64 // index of its last record; first-1 while empty
	path   string
	header int // size of its header
	// end is the offset just past its last record: the log's end within
	// the file, which is preallocated beyond it (see openSegment). It is
	// never the file's size.
	end int64
	// current is whether its header is the current version, whose records
	// carry their group and may carry a kind; only a current segment is
	// appended to.
	current bool
}

// zxidRun is a stretch of the log whose zxids are consecutive within one
// epoch: index first has zxid (epoch, firstCounter), first+1 the next
// counter, and so on through last. A Zab leader numbers its proposals
// densely, so a log holds a handful of runs, one per leadership, and they
// map index to zxid and back without reading the log.
type zxidRun struct {
	epoch        uint32
	firstCounter uint32
	first, last  uint64
}

func (r zxidRun) zxid(index uint64) uint64 {
	return MakeZxid(r.epoch, r.firstCounter+uint32(index-r.first))
}

// logBase is the entry just before the first one the log holds: index 0
// and zxid 0 for a log that starts at the beginning, else the last entry
// trimmed away or the snapshot the log continues. zxid is 0 when unknown.
type logBase struct {
	index, zxid uint64
}

// wal is the segmented, append-only transaction log. Appends, rolls and
// the fields marked writer-owned belong to one goroutine (the member's
// writer); trim and reads may run beside it and share only segs, under mu.
type wal struct {
	fs          fileSystem
	dir         string
	logger      *slog.Logger
	segmentSize int64

	// shape serializes the operations that remove segment files (trim,
	// truncate, reset), which may come from different goroutines.
	shape sync.Mutex
	mu    sync.Mutex
	segs  []segment // ascending by index; the last is the active segment
	runs  []zxidRun // ascending; cover (base.index, lastIndex]
	base  logBase

	// Writer-owned.
	active     logFile
	activeEnd  int64 // where the next append goes in active: its segment's end
	lastIndex  uint64
	lastZxid   uint64
	lastTime   int64
	buf        []byte
	noPrealloc bool // the filesystem refused to preallocate (logged once)
	observer   Observer
}

// openWAL reads and validates every segment in dir (on fsys), truncating a
// torn tail of the last one (see scanSegment for what is torn and what is
// refused). Zeros after a segment's last record are its unused,
// preallocated space, not damage. It leaves no segment open for writing:
// call resume or reset next.
func openWAL(fsys fileSystem, dir string, logger *slog.Logger, segmentSize int64) (*wal, error) {
	w := &wal{fs: fsys, dir: dir, logger: logger, segmentSize: segmentSize}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read log directory: %w", err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, tmpSuffix) {
			// Never renamed into place, so never part of the log.
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("remove leftover %s: %w", name, err)
			}
			continue
		}
		if first, ok := parseSegmentName(name); ok {
			w.segs = append(w.segs, segment{first: first, path: filepath.Join(dir, name)})
		}
	}
	slices.SortFunc(w.segs, func(a, b segment) int { return cmpUint64(a.first, b.first) })

	for i := range w.segs {
		seg := &w.segs[i]
		isLast := i == len(w.segs)-1
		if i > 0 && seg.first != w.lastIndex+1 {
			return nil, fmt.Errorf("log segment %s starts at index %d but the previous one ends at %d: entries are missing",
				filepath.Base(seg.path), seg.first, w.lastIndex)
		}
		buf, err := fsys.ReadFile(seg.path)
		if err != nil {
			return nil, fmt.Errorf("read log segment: %w", err)
		}
		s, err := scanSegment(buf, seg.first, w.lastZxid, isLast, w.noteEntry)
		if err != nil {
			return nil, fmt.Errorf("log segment %s is corrupt, refusing to start: %w", seg.path, err)
		}
		seg.header, seg.end, seg.current = s.header, int64(s.end), s.current
		if i == 0 {
			w.base = logBase{index: seg.first - 1, zxid: s.prevZxid}
			w.lastZxid = s.prevZxid
		}
		if s.torn != nil {
			// Cut, not zeroed: a truncation is one metadata change, so a
			// crash leaves the tail either whole or gone. resume
			// preallocates the segment again.
			w.logger.Warn("truncating torn tail of the log",
				"segment", seg.path, "offset", s.end, "bytes_dropped", len(trimZeros(buf[s.end:])),
				"last_whole_index", s.last, "records_after_damage", s.tornRecords, "reason", s.torn.Error())
			if err := truncateFile(fsys, seg.path, int64(s.end)); err != nil {
				return nil, err
			}
		}
		seg.last = s.last
		if s.last >= seg.first {
			w.lastIndex, w.lastZxid, w.lastTime = s.last, s.lastZxid, s.lastTime
		} else {
			w.lastIndex = seg.first - 1
		}
	}
	if len(w.segs) > 0 && w.lastIndex == w.base.index {
		w.lastZxid = w.base.zxid
	}
	return w, nil
}

// noteEntry extends the zxid runs with e, the new last entry. The caller
// holds mu, or is openWAL.
func (w *wal) noteEntry(e Entry) {
	if n := len(w.runs); n > 0 {
		r := &w.runs[n-1]
		if r.epoch == ZxidEpoch(e.Zxid) && r.last+1 == e.Index && r.zxid(r.last)+1 == e.Zxid {
			r.last = e.Index
			return
		}
	}
	w.runs = append(w.runs, zxidRun{epoch: ZxidEpoch(e.Zxid), firstCounter: ZxidCounter(e.Zxid), first: e.Index, last: e.Index})
}

// zxidAt returns the zxid of the entry at index, if the log knows it (it
// holds the entry, or index is the base).
func (w *wal) zxidAt(index uint64) (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.zxidAtLocked(index)
}

func (w *wal) zxidAtLocked(index uint64) (uint64, bool) {
	if index == w.base.index {
		return w.base.zxid, index == 0 || w.base.zxid != 0
	}
	for _, r := range w.runs {
		if r.first <= index && index <= r.last {
			return r.zxid(index), true
		}
	}
	return 0, false
}

// indexAtOrBelow returns the highest index whose zxid is at most zxid,
// among the entries the log holds and its base. ok is false when even the
// base is above zxid (or unknown): the answer lies in trimmed history.
func (w *wal) indexAtOrBelow(zxid uint64) (index uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.base.index == 0 || w.base.zxid != 0 {
		if w.base.zxid <= zxid {
			index, ok = w.base.index, true
		}
	}
	for _, r := range w.runs {
		if r.zxid(r.first) > zxid {
			break
		}
		if r.zxid(r.last) <= zxid {
			index, ok = r.last, true
			continue
		}
		// zxid falls inside this run, which is one epoch.
		return r.first + uint64(ZxidCounter(zxid)-r.firstCounter), true
	}
	return index, ok
}

// baseOf returns the log's base.
func (w *wal) baseOf() logBase {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.base
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// truncateFile cuts path to size, durably.
func truncateFile(fsys fileSystem, path string, size int64) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("open %s to truncate: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s after truncate: %w", path, err)
	}
	return nil
}

// firstIndex returns the index of the oldest entry the log can still hold.
func (w *wal) firstIndex() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.segs) == 0 {
		return 0
	}
	return w.segs[0].first
}

func (w *wal) segmentCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.segs)
}

// resume opens the last segment for appending at its end. A segment
// shorter than the segment size (cut by a truncation, or written before
// segments were preallocated) is preallocated again first. A segment of an
// older version is not appended to: it is sealed, and a current one
// continues it (or replaces it, if it holds no records).
func (w *wal) resume() error {
	w.mu.Lock()
	n := len(w.segs)
	seg := w.segs[n-1]
	if !seg.current && seg.last < seg.first {
		w.segs = w.segs[:n-1]
	}
	w.mu.Unlock()
	if !seg.current {
		// openSegment renames the new segment over an empty old one.
		return w.openSegment(w.lastIndex + 1)
	}
	f, err := w.fs.OpenFile(seg.path, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("open active segment: %w", err)
	}
	size, err := f.Size()
	if err == nil && size < w.segmentSize {
		if err = w.preallocate(f); err == nil {
			err = f.Sync()
		}
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("prepare active segment: %w", err)
	}
	w.active, w.activeEnd = f, seg.end
	return nil
}

// preallocate extends f to the segment size, unless the filesystem has
// refused before: the first refusal is logged, and from then on segment
// files grow as records are appended.
func (w *wal) preallocate(f logFile) error {
	if w.noPrealloc {
		return nil
	}
	err := f.Allocate(w.segmentSize)
	if errors.Is(err, errNoPreallocate) {
		w.noPrealloc = true
		w.logger.Warn("log segments cannot be preallocated on this filesystem; each sync also commits the segment's growth",
			"dir", w.dir, "reason", err.Error())
		return nil
	}
	return err
}

// reset drops every segment and starts an empty log whose next entry is
// next. It is used for a new log and when the state machine already holds
// every entry the log has.
func (w *wal) reset(next uint64) error { return w.resetAt(logBase{index: next - 1}) }

// resetAt drops every segment and starts an empty log that continues base:
// its next entry is base.index+1. A follower that installed a snapshot
// continues from the snapshot's index and zxid this way.
func (w *wal) resetAt(base logBase) error {
	w.shape.Lock()
	defer w.shape.Unlock()
	if err := w.close(); err != nil {
		return err
	}
	w.mu.Lock()
	old := w.segs
	w.segs, w.runs, w.base = nil, nil, base
	w.mu.Unlock()
	// Newest first, each removal durable before the next: a crash part way
	// leaves a contiguous (shorter) log.
	for i := len(old) - 1; i >= 0; i-- {
		if err := removeFileDurably(w.fs, old[i].path); err != nil {
			return fmt.Errorf("remove obsolete segment: %w", err)
		}
	}
	w.lastIndex, w.lastZxid, w.lastTime = base.index, base.zxid, 0
	return w.openSegment(base.index + 1)
}

// truncateAfter removes every entry above index, durably. index must not
// be below the log's base. A follower uses it to drop an uncommitted tail
// that the leader's history does not have (TRUNC).
func (w *wal) truncateAfter(index uint64) error {
	if index >= w.lastIndex {
		return nil
	}
	w.shape.Lock()
	defer w.shape.Unlock()
	w.mu.Lock()
	base := w.base
	zxid, known := w.zxidAtLocked(index)
	w.mu.Unlock()
	if index < base.index || !known {
		return fmt.Errorf("truncate after index %d: the log begins after index %d", index, base.index)
	}
	if err := w.close(); err != nil {
		return err
	}
	// Whole segments past index go first, newest first, each removal
	// durable before the next, so that a crash part way leaves a
	// contiguous log.
	for {
		w.mu.Lock()
		n := len(w.segs)
		last := w.segs[n-1]
		w.mu.Unlock()
		if n == 1 || last.first <= index {
			break
		}
		if err := removeFileDurably(w.fs, last.path); err != nil {
			return fmt.Errorf("remove truncated segment: %w", err)
		}
		w.mu.Lock()
		w.segs = w.segs[:n-1]
		w.mu.Unlock()
	}
	w.mu.Lock()
	seg := w.segs[len(w.segs)-1]
	w.mu.Unlock()
	buf, err := w.readSegment(seg)
	if err != nil {
		return fmt.Errorf("read segment to truncate: %w", err)
	}
	off, lastTime := seg.header, int64(0)
	for i := seg.first; i <= index; i++ {
		e, n, err := decodeRecord(buf[off:])
		if err != nil {
			return fmt.Errorf("segment %s offset %d: %w", seg.path, off, err)
		}
		off += n
		lastTime = e.Time
	}
	// Cut rather than zeroed, so that a crash leaves either every dropped
	// record or none, never a damaged one before whole ones; resume
	// preallocates the segment again.
	if err := truncateFile(w.fs, seg.path, int64(off)); err != nil {
		return err
	}
	w.mu.Lock()
	w.segs[len(w.segs)-1].last = max(index, seg.first-1)
	w.segs[len(w.segs)-1].end = int64(off)
	for len(w.runs) > 0 && w.runs[len(w.runs)-1].first > index {
		w.runs = w.runs[:len(w.runs)-1]
	}
	if n := len(w.runs); n > 0 && w.runs[n-1].last > index {
		w.runs[n-1].last = index
	}
	w.mu.Unlock()
	w.lastIndex, w.lastZxid, w.lastTime = index, zxid, lastTime
	return w.resume()
}

// openSegment creates a segment whose first record will be first, makes
// its creation durable, and makes it the active segment. Its header records
// the zxid of the entry before it (the log's last).
//
// The file is preallocated to the segment size (zeros after the header)
// before its fsync, rename and directory fsync, so that appends write
// inside it: the file does not grow, and the fdatasync of each group
// commit has no size change to commit. The zeros after the last record
// mark the log's end.
func (w *wal) openSegment(first uint64) error {
	path := filepath.Join(w.dir, segmentName(first))
	if err := createFileAtomic(w.fs, path, segmentHeader(first, w.lastZxid), w.preallocate); err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	f, err := w.fs.OpenFile(path, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("open new segment: %w", err)
	}
	w.active, w.activeEnd = f, int64(segmentHeaderSize)
	w.mu.Lock()
	w.segs = append(w.segs, segment{first: first, last: first - 1, path: path, header: segmentHeaderSize, end: int64(segmentHeaderSize), current: true})
	w.mu.Unlock()
	return nil
}

// append writes entries, which must continue the log densely, and returns
// once they are on stable storage (one fdatasync for all of them). They are
// one group write: each record says where in it it sits, which recovery
// relies on (see scanSegment), as it does on nothing else being written
// before that fdatasync returns. After an error the log's on-disk tail is
// unknown and the caller must stop writing.
func (w *wal) append(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	w.buf = w.buf[:0]
	for _, e := range entries {
		w.buf = appendRecord(w.buf, e, entries[0].Index)
	}
	// A group larger than a segment still goes whole into one (a fresh
	// one), growing it past its preallocated size. No active segment means
	// the last roll failed (the disk was full): try it again.
	if w.active == nil || (w.activeEnd > int64(segmentHeaderSize) && w.activeEnd+int64(len(w.buf)) > w.segmentSize) {
		if err := w.roll(entries[0].Index); err != nil {
			return &notWrittenError{err}
		}
	}
	if _, err := w.active.WriteAt(w.buf, w.activeEnd); err != nil {
		err = fmt.Errorf("write log: %w", err)
		if rerr := w.restoreTail(len(w.buf)); rerr != nil {
			return errors.Join(err, rerr)
		}
		return &notWrittenError{err}
	}
	w.activeEnd += int64(len(w.buf))
	start := time.Now()
	if err := w.active.Datasync(); err != nil {
		return fmt.Errorf("sync log: %w", err)
	}
	took := time.Since(start)
	if w.observer != nil {
		w.observer.LogSynced(took)
	}
	if took > slowSyncWarning {
		// etcd's warning, with its fields, so that the same alert fires.
		w.logger.Warn("slow fdatasync", "took", took, "expected-duration", slowSyncWarning,
			"entries", len(entries), "bytes", len(w.buf))
	}
	last := entries[len(entries)-1]
	w.lastIndex, w.lastZxid, w.lastTime = last.Index, last.Zxid, last.Time
	w.mu.Lock()
	w.segs[len(w.segs)-1].last = last.Index
	w.segs[len(w.segs)-1].end = w.activeEnd
	for _, e := range entries {
		w.noteEntry(e)
	}
	w.mu.Unlock()
	// Large batches would otherwise pin a large buffer for the member's life.
	if cap(w.buf) > 8<<20 {
		w.buf = nil
	}
	return nil
}

// slowSyncWarning is how long an fdatasync may take before it is logged,
// etcd's expected duration for its WAL sync.
const slowSyncWarning = time.Second

// notWrittenError is an append that wrote nothing of its group: the log
// on disk and in memory is as before the call, so the caller may append
// again (the same entries or others at the same indexes) once the cause is
// gone. Every other append error leaves the log's tail unknown.
type notWrittenError struct{ err error }

func (e *notWrittenError) Error() string { return e.err.Error() }
func (e *notWrittenError) Unwrap() error { return e.err }

// restoreTail undoes a failed write of n bytes at the active segment's
// end, so that the zeros after the last record again mark the log's end:
// growth past the preallocated size (or, without preallocation, past the
// end) is cut, and the part inside the preallocation is zeroed, which
// needs no new blocks. If it fails, the tail is unknown.
func (w *wal) restoreTail(n int) error {
	end, keep := w.activeEnd+int64(n), w.activeEnd
	if !w.noPrealloc {
		keep = max(keep, w.segmentSize)
	}
	if end > keep {
		if err := w.active.Truncate(keep); err != nil {
			return fmt.Errorf("cut failed log write: %w", err)
		}
		end = keep
	}
	if end > w.activeEnd {
		if _, err := w.active.WriteAt(make([]byte, end-w.activeEnd), w.activeEnd); err != nil {
			return fmt.Errorf("zero failed log write: %w", err)
		}
	}
	return nil
}

// roll seals the active segment (already synced by the append that wrote
// it) and starts a new one at first. The sealed segment keeps the zeros
// after its last record. If the new segment cannot be created, there is
// no active segment until a later roll succeeds; the log is otherwise
// unchanged.
func (w *wal) roll(first uint64) error {
	if w.active != nil {
		err := w.active.Close()
		w.active = nil
		if err != nil {
			return fmt.Errorf("close sealed segment: %w", err)
		}
	}
	return w.openSegment(first)
}

// trimThrough removes every sealed segment whose entries are all at or
// below index. The active segment is never removed.
func (w *wal) trimThrough(index uint64) (removed int, err error) {
	w.shape.Lock()
	defer w.shape.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for n < len(w.segs)-1 && w.segs[n].last <= index {
		n++
	}
	// Oldest first, each removal durable before the next, so a crash
	// mid-trim still leaves a contiguous log. A segment whose removal
	// failed half way (removed, directory not synced) is gone all the same.
	for removed < n {
		path := w.segs[removed].path
		if err = w.fs.Remove(path); err != nil {
			err = fmt.Errorf("remove segment: %w", err)
			break
		}
		removed++
		if err = w.fs.SyncDir(w.dir); err != nil {
			break
		}
	}
	if removed > 0 {
		newFirst := w.segs[removed].first
		zxid, _ := w.zxidAtLocked(newFirst - 1)
		w.base = logBase{index: newFirst - 1, zxid: zxid}
		for len(w.runs) > 0 && w.runs[0].last < newFirst {
			w.runs = w.runs[1:]
		}
		if len(w.runs) > 0 && w.runs[0].first < newFirst {
			r := &w.runs[0]
			r.firstCounter += uint32(newFirst - r.first)
			r.first = newFirst
		}
	}
	w.segs = slices.Delete(w.segs, 0, removed)
	return removed, err
}

// errLogGap is returned by read when the requested entries are no longer in
// the log.
var errLogGap = errors.New("entries no longer in the log")

// read calls fn with consecutive batches of at most batch entries holding
// every entry in [from, to]. Entries at or below to must be on disk (the
// caller knows they were synced), and must not be trimmed meanwhile.
// Entries' Data alias buffers read for this call alone, so fn may retain
// them.
func (w *wal) read(from, to uint64, batch int, fn func([]Entry) error) error {
	if from > to {
		return nil
	}
	w.mu.Lock()
	segs := slices.Clone(w.segs)
	w.mu.Unlock()
	if len(segs) == 0 || segs[0].first > from {
		return fmt.Errorf("read from index %d: %w", from, errLogGap)
	}
	next := from
	pending := make([]Entry, 0, batch)
	for _, seg := range segs {
		if seg.last < next || seg.first > to {
			continue
		}
		buf, err := w.readSegment(seg)
		if err != nil {
			return fmt.Errorf("read log segment: %w", err)
		}
		off := seg.header
		for next <= to && next <= seg.last {
			e, n, err := decodeRecord(buf[off:])
			if err != nil {
				return fmt.Errorf("log segment %s, offset %d: %w", seg.path, off, err)
			}
			off += n
			if e.Index < next {
				continue
			}
			if e.Index != next {
				return fmt.Errorf("log segment %s, offset %d: index %d, want %d", seg.path, off-n, e.Index, next)
			}
			pending = append(pending, e)
			next++
			if len(pending) == batch {
				if err := fn(pending); err != nil {
					return err
				}
				pending = make([]Entry, 0, batch)
			}
		}
	}
	if len(pending) > 0 {
		if err := fn(pending); err != nil {
			return err
		}
	}
	if next <= to {
		return fmt.Errorf("read through index %d: log ends at %d: %w", to, next-1, errLogGap)
	}
	return nil
}

// readSegment reads seg's header and records, up to its end.
func (w *wal) readSegment(seg segment) ([]byte, error) {
	f, err := w.fs.OpenFile(seg.path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, seg.end)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("%s is shorter than its records (%d bytes): %w", seg.path, seg.end, err)
	}
	return buf, nil
}

// close closes the active segment. Everything appended is already durable.
func (w *wal) close() error {
	if w.active == nil {
		return nil
	}
	err := w.active.Close()
	w.active = nil
	if err != nil {
		return fmt.Errorf("close active segment: %w", err)
	}
	return nil
}
