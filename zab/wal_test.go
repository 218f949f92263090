package zab

import (
	"os"
	"path/filepath"
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
// segment at path.
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
	return appendRecord(nil, Entry{Index: last.Index + 1, Zxid: last.Zxid + 1, Time: last.Time, Data: []byte("late")})
}
