package zab

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestRecoveryTruncatesATornTail(t *testing.T) {
	const n = 20
	tests := []struct {
		name string
		// damage damages the last segment, given its record offsets.
		damage func(t *testing.T, path string, offs []int)
		kept   int  // entries that survive
		clean  bool // nothing to truncate: no warning
	}{
		{"cut one byte into the last record", func(t *testing.T, path string, offs []int) {
			os.Truncate(path, int64(offs[len(offs)-1]+1))
		}, n - 1, false},
		{"cut in the last record's header", func(t *testing.T, path string, offs []int) {
			os.Truncate(path, int64(offs[len(offs)-1]+recordPrefixSize+3))
		}, n - 1, false},
		{"cut one byte short of the end", func(t *testing.T, path string, offs []int) {
			os.Truncate(path, recordsEnd(t, path)-1)
		}, n - 1, false},
		{"flipped byte in the last record's payload", func(t *testing.T, path string, offs []int) {
			flipByte(t, path, recordsEnd(t, path)-1)
		}, n - 1, false},
		{"flipped byte in the last record's checksum", func(t *testing.T, path string, offs []int) {
			flipByte(t, path, int64(offs[len(offs)-1]+5))
		}, n - 1, false},
		{"flipped byte in the last record's length", func(t *testing.T, path string, offs []int) {
			flipByte(t, path, int64(offs[len(offs)-1]))
		}, n - 1, false},
		{"zeros after the last record", func(t *testing.T, path string, offs []int) {
			appendBytes(t, path, make([]byte, 100))
		}, n, true},
		{"garbage after the preallocated space", func(t *testing.T, path string, offs []int) {
			appendBytes(t, path, []byte(strings.Repeat("\x07garbage", 20)))
		}, n, false},
		{"garbage right after the last record", func(t *testing.T, path string, offs []int) {
			writeBytesAt(t, path, recordsEnd(t, path), []byte("\x07garbage"))
		}, n, false},
		{"last record half written, zeros after", func(t *testing.T, path string, offs []int) {
			end := recordsEnd(t, path)
			from := int64(offs[len(offs)-1] + recordPrefixSize + 4)
			writeBytesAt(t, path, from, make([]byte, end-from))
		}, n - 1, false},
		{"last record's header zeroed, its body left", func(t *testing.T, path string, offs []int) {
			writeBytesAt(t, path, int64(offs[len(offs)-1]), make([]byte, recordPrefixSize))
		}, n - 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Dir: dir, SegmentSize: 300}
			m := openT(t, cfg, &memSM{})
			proposeN(t, m, n)
			closeT(t, m)
			segs := segmentFiles(t, dir)
			if len(segs) < 2 {
				t.Fatalf("want several segments, got %d", len(segs))
			}
			last := segs[len(segs)-1]
			offs := recordOffsets(t, last)
			tt.damage(t, last, offs)

			var logs logBuffer
			cfg.Logger = logs.logger()
			sm := &memSM{}
			m = openT(t, cfg, sm)
			if got := len(sm.snapshot()); got != tt.kept {
				t.Fatalf("replayed %d entries, want %d", got, tt.kept)
			}
			if warned := strings.Contains(logs.String(), "truncating torn tail"); warned == tt.clean {
				t.Errorf("warning about a truncation: %v, want %v; log output:\n%s", warned, !tt.clean, logs.String())
			}
			// Truncation cut the file; it is preallocated again.
			if size := fileSize(t, last); size < cfg.SegmentSize {
				t.Errorf("active segment is %d bytes, want at least the segment size %d", size, cfg.SegmentSize)
			}
			// The log continues right after the last whole record.
			if r := proposeT(t, m, "next"); r.Index != uint64(tt.kept+1) {
				t.Fatalf("next index %d, want %d", r.Index, tt.kept+1)
			}
			closeT(t, m)
			checkLog(t, dir, append(payloads(tt.kept), "next"))
		})
	}
}

func TestRecoveryRefusesDamageInTheMiddle(t *testing.T) {
	const n = 20
	tests := []struct {
		name        string
		segmentSize int64
		damage      func(t *testing.T, dir string, segs []string)
		wantErr     string
	}{
		{"bad checksum followed by valid records", 1 << 20, func(t *testing.T, dir string, segs []string) {
			offs := recordOffsets(t, segs[0])
			flipByte(t, segs[0], int64(offs[3]+recordHeaderSize))
		}, "followed by a valid record"},
		{"damaged length followed by valid records", 1 << 20, func(t *testing.T, dir string, segs []string) {
			offs := recordOffsets(t, segs[0])
			flipByte(t, segs[0], int64(offs[n-2]))
		}, "followed by a valid record"},
		{"zeroed record followed by valid records", 1 << 20, func(t *testing.T, dir string, segs []string) {
			offs := recordOffsets(t, segs[0])
			writeBytesAt(t, segs[0], int64(offs[3]), make([]byte, recordHeaderSize))
		}, "followed by a valid record"},
		{"garbage after the last record, then a valid record", 1 << 20, func(t *testing.T, dir string, segs []string) {
			end, next := recordsEnd(t, segs[0]), nextRecord(t, segs[0])
			writeBytesAt(t, segs[0], end, []byte("\x07garbage"))
			writeBytesAt(t, segs[0], end+64, next)
		}, "followed by a valid record"},
		{"zeros after the last record, then a valid record", 1 << 20, func(t *testing.T, dir string, segs []string) {
			writeBytesAt(t, segs[0], recordsEnd(t, segs[0])+64, nextRecord(t, segs[0]))
		}, "followed by a valid record"},
		{"sealed segment cut short", 300, func(t *testing.T, dir string, segs []string) {
			os.Truncate(segs[0], recordsEnd(t, segs[0])-3)
		}, "sealed segment"},
		{"bad checksum at the end of a sealed segment", 300, func(t *testing.T, dir string, segs []string) {
			flipByte(t, segs[1], recordsEnd(t, segs[1])-1)
		}, "sealed segment"},
		{"garbage in a sealed segment's unused space", 300, func(t *testing.T, dir string, segs []string) {
			if size := fileSize(t, segs[0]); size <= recordsEnd(t, segs[0]) {
				t.Fatalf("sealed segment has no unused space (%d bytes)", size)
			}
			flipByte(t, segs[0], fileSize(t, segs[0])-1)
		}, "sealed segment"},
		{"missing segment", 300, func(t *testing.T, dir string, segs []string) {
			os.Remove(segs[1])
		}, "entries are missing"},
		{"damaged segment header", 300, func(t *testing.T, dir string, segs []string) {
			flipByte(t, segs[len(segs)-1], 2)
		}, "bad segment header"},
		{"segment renamed", 300, func(t *testing.T, dir string, segs []string) {
			last := segs[len(segs)-1]
			os.Rename(last, filepath.Join(dir, segmentName(1000)))
		}, "entries are missing"},
		{"damaged epoch file", 1 << 20, func(t *testing.T, dir string, segs []string) {
			flipByte(t, filepath.Join(dir, epochFileName), 5)
		}, "epoch file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Dir: dir, SegmentSize: tt.segmentSize}
			m := openT(t, cfg, &memSM{})
			proposeN(t, m, n)
			closeT(t, m)
			segs := segmentFiles(t, dir)
			if tt.segmentSize < 1<<20 && len(segs) < 3 {
				t.Fatalf("want at least 3 segments, got %d", len(segs))
			}
			tt.damage(t, dir, segs)
			sizes := map[string]int64{}
			for _, p := range segmentFiles(t, dir) {
				sizes[p] = fileSize(t, p)
			}

			for range 2 { // refused every time: nothing was "repaired" and the lock was released
				_, err := Open(cfg, &memSM{})
				if err == nil {
					t.Fatal("Open succeeded on a damaged log")
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Open error %q does not mention %q", err, tt.wantErr)
				}
			}
			for p, size := range sizes {
				if got := fileSize(t, p); got != size {
					t.Errorf("%s changed size %d → %d on a refused Open", filepath.Base(p), size, got)
				}
			}
		})
	}
}

func TestOpenRemovesLeftoverTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	m := openT(t, Config{Dir: dir}, &memSM{})
	proposeN(t, m, 2)
	closeT(t, m)
	// A segment whose creation crashed before its rename.
	leftover := filepath.Join(dir, segmentName(3)+tmpSuffix)
	if err := os.WriteFile(leftover, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkLog(t, dir, payloads(2))
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover temporary file still there: %v", err)
	}
}

// nextRecord encodes the record that would follow the last one of the
// segment at path, as the first of a new group write.
func nextRecord(t *testing.T, path string) []byte {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := recordOffsets(t, path)
	last, _, err := decodeRecord(buf[offs[len(offs)-1]:])
	if err != nil {
		t.Fatal(err)
	}
	next := last.Index + 1
	return appendRecord(nil, Entry{Index: next, Zxid: last.Zxid + 1, Time: last.Time, Data: []byte("late")}, next)
}

// Segment files are preallocated to the segment size when created, rolled
// segments keep their unused zeros, and a reopened log holds exactly the
// records written, its next append going right after them.
func TestSegmentsArePreallocated(t *testing.T) {
	dir := t.TempDir()
	const size = 512
	cfg := Config{Dir: dir, SegmentSize: size}
	m := openT(t, cfg, &memSM{})
	segs := segmentFiles(t, dir)
	if len(segs) != 1 || fileSize(t, segs[0]) != size {
		t.Fatalf("new log: segments %v, want one of %d bytes", segs, size)
	}
	proposeN(t, m, 40)
	closeT(t, m)
	segs = segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	for _, p := range segs {
		if got := fileSize(t, p); got != size {
			t.Errorf("%s is %d bytes, want %d", filepath.Base(p), got, size)
		}
	}

	sm := &memSM{}
	m = openT(t, cfg, sm)
	if got := len(sm.snapshot()); got != 40 {
		t.Fatalf("reopen replayed %d entries, want 40", got)
	}
	if r := proposeT(t, m, "next"); r.Index != 41 {
		t.Fatalf("next index %d, want 41", r.Index)
	}
	closeT(t, m)
	for _, p := range segmentFiles(t, dir) {
		if got := fileSize(t, p); got != size {
			t.Errorf("after reopen, %s is %d bytes, want %d", filepath.Base(p), got, size)
		}
	}
	// (checkLog opens with the default segment size, to which the active
	// segment then grows: it checks sizes no more.)
	checkLog(t, dir, append(payloads(40), "next"))
}

// A group larger than a segment goes whole into one, which grows past the
// preallocated size; the next group rolls.
func TestWALGroupLargerThanASegment(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir) // 300-byte segments
	if err := w.append(walEntries(1, 1, 1, 2)); err != nil {
		t.Fatal(err)
	}
	big := walEntries(3, 1, 3, 20)
	if err := w.append(big); err != nil {
		t.Fatal(err)
	}
	if err := w.append(walEntries(23, 1, 23, 1)); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	if len(segs) != 3 {
		t.Fatalf("want 3 segments, got %d", len(segs))
	}
	if offs := recordOffsets(t, segs[1]); len(offs) != len(big) {
		t.Fatalf("the big group's segment holds %d records, want %d", len(offs), len(big))
	}
	if end, size := recordsEnd(t, segs[1]), fileSize(t, segs[1]); end <= 300 || size != end {
		t.Fatalf("the big group's segment ends at %d and is %d bytes", end, size)
	}
	w.close()
	w = openTestWAL(t, dir)
	if w.lastIndex != 23 {
		t.Fatalf("reopened log ends at %d, want 23", w.lastIndex)
	}
	var got []Entry
	if err := w.read(1, 23, 5, func(b []Entry) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if e.Index != uint64(i+1) {
			t.Fatalf("read entry %d has index %d", i, e.Index)
		}
	}
	if len(got) != 23 {
		t.Fatalf("read %d entries, want 23", len(got))
	}
}

// A truncation (TRUNC from a leader) cuts the active segment after the
// kept records and preallocates it again; appends continue at the cut, and
// the dropped records never come back.
func TestWALTruncateAfterKeepsPreallocation(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir)
	if err := w.append(walEntries(1, 1, 1, 6)); err != nil {
		t.Fatal(err)
	}
	if err := w.truncateAfter(3); err != nil {
		t.Fatal(err)
	}
	seg := segmentFiles(t, dir)[0]
	if got := fileSize(t, seg); got != 300 {
		t.Fatalf("after truncate the segment is %d bytes, want 300", got)
	}
	if offs := recordOffsets(t, seg); len(offs) != 3 {
		t.Fatalf("after truncate the segment holds %d records, want 3", len(offs))
	}
	if err := w.append(walEntries(4, 2, 1, 1)); err != nil {
		t.Fatal(err)
	}
	w.close()
	w = openTestWAL(t, dir)
	if w.lastIndex != 4 || w.lastZxid != MakeZxid(2, 1) {
		t.Fatalf("after truncate, append and reopen: last %d %s", w.lastIndex, FormatZxid(w.lastZxid))
	}
}

// On a filesystem that cannot preallocate, the log says so once and grows
// its segment files as it writes.
func TestSegmentsWithoutPreallocation(t *testing.T) {
	dir := t.TempDir()
	fsys := &noAllocateFS{fileSystem: osFS{}}
	var logs logBuffer
	w, err := openWAL(fsys, dir, logs.logger(), 300)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.reset(1); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := w.append(walEntries(uint64(i+1), 1, uint32(i+1), 1)); err != nil {
			t.Fatal(err)
		}
	}
	w.close()
	if got := strings.Count(logs.String(), "cannot be preallocated"); got != 1 {
		t.Errorf("warned %d times about preallocation, want once:\n%s", got, logs.String())
	}
	if fsys.calls != 1 {
		t.Errorf("Allocate called %d times after it was refused, want once", fsys.calls)
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 2 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	for _, p := range segs {
		if end, size := recordsEnd(t, p), fileSize(t, p); size != end {
			t.Errorf("%s is %d bytes, its records end at %d", filepath.Base(p), size, end)
		}
	}
	w = openTestWAL(t, dir)
	if got := readAll(t, w); len(got) != 20 {
		t.Fatalf("reopened log holds %d entries, want 20", len(got))
	}
}

// noAllocateFS is a filesystem that cannot preallocate, counting the
// attempts.
type noAllocateFS struct {
	fileSystem
	calls int
}

func (fsys *noAllocateFS) OpenFile(path string, flag int) (logFile, error) {
	f, err := fsys.fileSystem.OpenFile(path, flag)
	if err != nil {
		return nil, err
	}
	return noAllocateFile{f, fsys}, nil
}

type noAllocateFile struct {
	logFile
	fsys *noAllocateFS
}

func (f noAllocateFile) Allocate(int64) error {
	f.fsys.calls++
	return fmt.Errorf("%w: %s", errNoPreallocate, f.Name())
}

// readAll returns every entry w holds.
func readAll(t *testing.T, w *wal) []Entry {
	t.Helper()
	var got []Entry
	if w.lastIndex < w.firstIndex() {
		return nil
	}
	if err := w.read(w.firstIndex(), w.lastIndex, 64, func(b []Entry) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// A power loss can write the pages of the last group write back in any
// order: zeros or a torn record, then valid records of that same group.
// None of it was acknowledged, so the log cuts it; damage followed by a
// record of a later group write was synced, so the log refuses it.
func TestRecoveryTellsATornLastGroupFromSyncedDamage(t *testing.T) {
	tests := []struct {
		name    string
		damage  int    // index of the record to zero (its first half)
		kept    uint64 // entries left; 0 when the log must refuse
		wantErr string
	}{
		{"last group's first record zeroed, the rest written back", 6, 5, ""},
		{"last group's middle record zeroed", 10, 9, ""},
		{"last group's last record zeroed", 15, 14, ""},
		{"earlier group's record zeroed", 3, 0, "of a later group write (from index 6), so it had been synced"},
		{"earlier group's last record zeroed", 5, 0, "of a later group write (from index 6), so it had been synced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := openWAL(osFS{}, dir, slog.New(slog.DiscardHandler), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.reset(1); err != nil {
				t.Fatal(err)
			}
			for _, g := range [][]Entry{walEntries(1, 1, 1, 5), walEntries(6, 1, 6, 10)} {
				if err := w.append(g); err != nil {
					t.Fatal(err)
				}
			}
			w.close()
			seg := segmentFiles(t, dir)[0]
			offs := recordOffsets(t, seg)
			from, to := offs[tt.damage-1], int(recordsEnd(t, seg))
			if tt.damage < len(offs) {
				to = offs[tt.damage]
			}
			writeBytesAt(t, seg, int64(from), make([]byte, (to-from)/2+1))

			var logs logBuffer
			w, err = openWAL(osFS{}, dir, logs.logger(), 1<<20)
			if tt.kept == 0 {
				if err == nil {
					t.Fatalf("the log opened with record %d of a synced group damaged", tt.damage)
				}
				for _, want := range []string{tt.wantErr, filepath.Base(seg), fmt.Sprintf("offset %d", from)} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("the log refused a torn last group: %v", err)
			}
			if w.lastIndex != tt.kept {
				t.Fatalf("the log ends at %d, want %d", w.lastIndex, tt.kept)
			}
			if after := 15 - tt.damage; !strings.Contains(logs.String(), fmt.Sprintf("records_after_damage=%d", after)) {
				t.Errorf("the warning does not count %d records after the damage:\n%s", after, logs.String())
			}
			if err := w.resume(); err != nil {
				t.Fatal(err)
			}
			next := walEntries(tt.kept+1, 2, 1, 3)
			if err := w.append(next); err != nil {
				t.Fatal(err)
			}
			w.close()
			w = openTestWAL(t, dir)
			if got := readAll(t, w); len(got) != int(tt.kept)+3 || got[len(got)-1].Zxid != next[2].Zxid {
				t.Fatalf("after the cut and an append the log holds %d entries ending at %s", len(got), FormatZxid(got[len(got)-1].Zxid))
			}
		})
	}
}

// writeOldSegment writes a segment of an older format (magic
// segmentMagicV2: records without their group; segmentMagicV3: records
// with their group, no kinds) holding ents, as those versions did.
func writeOldSegment(t *testing.T, dir, magic string, first, prevZxid uint64, ents []Entry) string {
	t.Helper()
	b := append([]byte(magic), segmentHeader(first, prevZxid)[len(segmentMagic):]...)
	for _, e := range ents {
		groupFirst := uint64(0)
		if magic != segmentMagicV2 {
			groupFirst = ents[0].Index
		}
		b = appendRecord(b, e, groupFirst)
	}
	path := filepath.Join(dir, segmentName(first))
	if err := os.WriteFile(path, append(b, make([]byte, 100)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A log written by an older version (records without their group, or
// segments that cannot hold kinds) is read as it was; it is never appended
// to, so a binary that does not know groups or kinds refuses the new
// segments instead of cutting their records as a torn tail.
func TestOldSegmentsAreReadAndSealed(t *testing.T) {
	for _, magic := range []string{segmentMagicV2, segmentMagicV3} {
		t.Run(magic, func(t *testing.T) { testOldSegment(t, magic) })
	}
	t.Run("damage followed by a record without its group is refused", func(t *testing.T) {
		dir := t.TempDir()
		old := writeOldSegment(t, dir, segmentMagicV2, 1, 0, walEntries(1, 1, 1, 4))
		writeBytesAt(t, old, int64(recordOffsets(t, old)[1]), make([]byte, 8))
		_, err := openWAL(osFS{}, dir, slog.New(slog.DiscardHandler), 300)
		if err == nil || !strings.Contains(err.Error(), "does not say which group write it belongs to") {
			t.Fatalf("Open error %v, want a refusal", err)
		}
	})
	// Nothing writes a record with a kind into a segment of a format
	// without kinds; one found there is refused, not cut.
	t.Run("a record with a kind in a format-3 segment is refused", func(t *testing.T) {
		dir := t.TempDir()
		ents := walEntries(1, 1, 1, 4)
		ents[1].Kind, ents[1].Data = EntryMembership, EncodeMembership(Membership{Voters: []uint64{1}})
		writeOldSegment(t, dir, segmentMagicV3, 1, 0, ents)
		_, err := openWAL(osFS{}, dir, slog.New(slog.DiscardHandler), 300)
		if err == nil || !strings.Contains(err.Error(), "record 2 at offset") || !strings.Contains(err.Error(), "format without kinds") {
			t.Fatalf("Open error %v, want a refusal naming record 2", err)
		}
	})
}

func testOldSegment(t *testing.T, magic string) {
	t.Run("with records", func(t *testing.T) {
		dir := t.TempDir()
		old := writeOldSegment(t, dir, magic, 1, 0, walEntries(1, 1, 1, 4))
		w := openTestWAL(t, dir)
		next := walEntries(5, 1, 5, 2)
		next[1].Kind, next[1].Data = EntryMembership, EncodeMembership(Membership{Voters: []uint64{1, 2}})
		if err := w.append(next); err != nil {
			t.Fatal(err)
		}
		w.close()
		segs := segmentFiles(t, dir)
		if len(segs) != 2 || segs[0] != old {
			t.Fatalf("segments %v, want the old one and a new one", segs)
		}
		buf, err := os.ReadFile(segs[1])
		if err != nil {
			t.Fatal(err)
		}
		if !isCurrentSegment(buf) {
			t.Fatalf("the new segment starts %q", buf[:8])
		}
		got := readAll(t, openTestWAL(t, dir))
		if len(got) != 6 {
			t.Fatalf("the log holds %d entries, want 6", len(got))
		}
		if got[5].Kind != EntryMembership || got[4].Kind != EntryData {
			t.Fatalf("entries 5 and 6 read back with kinds %d and %d", got[4].Kind, got[5].Kind)
		}
	})
	t.Run("empty", func(t *testing.T) {
		dir := t.TempDir()
		writeOldSegment(t, dir, magic, 7, MakeZxid(3, 9), nil)
		w := openTestWAL(t, dir)
		if err := w.append(walEntries(7, 4, 1, 2)); err != nil {
			t.Fatal(err)
		}
		w.close()
		segs := segmentFiles(t, dir)
		if len(segs) != 1 {
			t.Fatalf("segments %v, want one", segs)
		}
		w = openTestWAL(t, dir)
		if base := w.baseOf(); base.index != 6 || base.zxid != MakeZxid(3, 9) {
			t.Fatalf("base %d %s, want 6 %s", base.index, FormatZxid(base.zxid), FormatZxid(MakeZxid(3, 9)))
		}
		if got := readAll(t, w); len(got) != 2 {
			t.Fatalf("the log holds %d entries, want 2", len(got))
		}
	})
}

// A segment of a format later than this binary reads is refused, naming
// the segment and the format, and left as it is: its records may mean
// what this binary cannot read, so they are neither replayed nor cut.
func TestLaterSegmentFormatIsRefused(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir)
	if err := w.append(walEntries(1, 1, 1, 3)); err != nil {
		t.Fatal(err)
	}
	w.close()
	seg := segmentFiles(t, dir)[0]
	writeBytesAt(t, seg, int64(len(segmentMagicFamily)), []byte{'5'})
	size := fileSize(t, seg)
	_, err := openWAL(osFS{}, dir, slog.New(slog.DiscardHandler), 300)
	if err == nil || !strings.Contains(err.Error(), filepath.Base(seg)) || !strings.Contains(err.Error(), "segment format 5 is newer than this binary reads") {
		t.Fatalf("Open error %v, want a refusal naming the segment and its format", err)
	}
	if got := fileSize(t, seg); got != size {
		t.Fatalf("the refused segment changed size %d → %d", size, got)
	}
}

// A configuration entry's record is recovered like any other: cutting the
// last group write at any byte keeps every record before the cut, the
// acknowledged configuration entry and its kind included, and damage to
// that configuration record anywhere is refused once a later group write
// proves it was synced, never cut as a torn tail.
func TestConfigurationRecordsSurviveEveryCut(t *testing.T) {
	conf := func(e Entry, voters ...uint64) Entry {
		e.Kind, e.Data = EntryMembership, EncodeMembership(Membership{Voters: voters})
		return e
	}
	g1, g2, g3 := walEntries(1, 1, 1, 3), walEntries(4, 1, 4, 1), walEntries(5, 1, 5, 3)
	g2[0] = conf(g2[0], 1, 2, 3)
	g3[1] = conf(g3[1], 1, 2, 3, 4) // unacknowledged once the cut lands before its end
	want := slices.Concat(g1, g2, g3)
	src := t.TempDir()
	w, err := openWAL(osFS{}, src, slog.New(slog.DiscardHandler), 1<<20)
	if err == nil {
		err = w.reset(1)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range [][]Entry{g1, g2, g3} {
		if err := w.append(g); err != nil {
			t.Fatal(err)
		}
	}
	w.close()
	seg := segmentFiles(t, src)[0]
	orig, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	offs, end := scanRecords(t, seg)
	orig = orig[:end+100] // the preallocated zeros after the records, shortened
	// open recovers a copy of the segment changed by damage and returns
	// the entries the log then holds.
	open := func(damage func(b []byte) []byte) ([]Entry, error) {
		dir := t.TempDir()
		path := filepath.Join(dir, filepath.Base(seg))
		if err := os.WriteFile(path, damage(bytes.Clone(orig)), 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := openWAL(osFS{}, dir, slog.New(slog.DiscardHandler), 1<<20)
		if err != nil {
			return nil, err
		}
		return readAll(t, w), nil
	}

	cuts := 0
	for cut := offs[4]; cut < end; cut++ { // every byte of the last group write
		// Zeroing bytes that are zero already damages nothing: the
		// zeroed tail damages the first record with a non-zero byte
		// after cut.
		zeroedFrom := cut
		for zeroedFrom < end && orig[zeroedFrom] == 0 {
			zeroedFrom++
		}
		for _, tear := range []struct {
			name    string
			damage  func(b []byte) []byte
			damaged int
		}{
			{"cut", func(b []byte) []byte { return b[:cut] }, cut},
			{"zeroed", func(b []byte) []byte { clear(b[cut:end]); return b }, zeroedFrom},
		} {
			got, err := open(tear.damage)
			if err != nil {
				t.Fatalf("last group %s at offset %d: the log refused to open: %v", tear.name, cut, err)
			}
			checkEntries(t, fmt.Sprintf("last group %s at offset %d", tear.name, cut), got, want[:wholeBefore(offs, end, tear.damaged)])
			cuts++
		}
	}

	refused := 0
	for off := offs[3]; off < offs[4]; off++ { // every byte of the configuration record
		_, err := open(func(b []byte) []byte { b[off] ^= 0x10; return b })
		if err == nil || !strings.Contains(err.Error(), "of a later group write (from index 5), so it had been synced") {
			t.Fatalf("configuration record damaged at offset %d: Open error %v, want a refusal", off, err)
		}
		refused++
	}
	t.Logf("%d torn last groups recovered, %d damaged configuration records refused", cuts, refused)
}

// wholeBefore is how many records of a segment whose records start at
// offs and end at end lie whole before offset cut.
func wholeBefore(offs []int, end, cut int) int {
	n := 0
	for i := range offs {
		next := end
		if i+1 < len(offs) {
			next = offs[i+1]
		}
		if next <= cut {
			n++
		}
	}
	return n
}

// checkEntries compares entries read back with the ones written, field by
// field, the kind included.
func checkEntries(t *testing.T, what string, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: the log holds %d entries, want %d", what, len(got), len(want))
	}
	for i, e := range got {
		wa := want[i]
		if e.Index != wa.Index || e.Zxid != wa.Zxid || e.Time != wa.Time || e.Origin != wa.Origin || e.ReqID != wa.ReqID ||
			e.Kind != wa.Kind || !bytes.Equal(e.Data, wa.Data) {
			t.Fatalf("%s: entry %d is %+v, want %+v", what, e.Index, e, wa)
		}
	}
}
