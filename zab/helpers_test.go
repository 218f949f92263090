package zab

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// applied is what memSM returns for each entry: enough for a proposer to
// check it got the result of its own entry.
type applied struct {
	Index uint64
	Data  string
}

// memSM is an in-memory state machine that records every entry it applies.
type memSM struct {
	mu      sync.Mutex
	start   uint64 // AppliedIndex reported at Open
	entries []Entry
	synced  uint64 // what Sync reports; if syncAll, the applied index
	syncAll bool
	failAt  uint64        // Apply fails on the batch holding this index
	gate    chan struct{} // if set, the first Apply waits for it to close
	entered chan struct{} // closed when the first Apply starts
	once    sync.Once
}

func (s *memSM) Apply(entries []Entry) ([]any, error) {
	if s.gate != nil {
		s.once.Do(func() { close(s.entered) })
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]any, len(entries))
	for i, e := range entries {
		if s.failAt != 0 && e.Index == s.failAt {
			return nil, fmt.Errorf("injected failure at index %d", e.Index)
		}
		if want := s.lastLocked() + 1; e.Index != want {
			return nil, fmt.Errorf("applied index %d, want %d", e.Index, want)
		}
		e.Data = bytes.Clone(e.Data)
		s.entries = append(s.entries, e)
		out[i] = applied{Index: e.Index, Data: string(e.Data)}
	}
	return out, nil
}

func (s *memSM) lastLocked() uint64 {
	if len(s.entries) == 0 {
		return s.start
	}
	return s.entries[len(s.entries)-1].Index
}

func (s *memSM) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastLocked()
}

func (s *memSM) Sync() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncAll {
		return s.lastLocked(), nil
	}
	return s.synced, nil
}

func (s *memSM) setSynced(i uint64) {
	s.mu.Lock()
	s.synced = i
	s.mu.Unlock()
}

func (s *memSM) snapshot() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// logBuffer collects a member's log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func openT(t *testing.T, cfg Config, sm StateMachine) *Member {
	t.Helper()
	m, err := Open(cfg, sm)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func closeT(t *testing.T, m *Member) {
	t.Helper()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func proposeT(t *testing.T, m *Member, data string) applied {
	t.Helper()
	v, err := m.Propose(context.Background(), []byte(data))
	if err != nil {
		t.Fatalf("Propose(%q): %v", data, err)
	}
	return v.(applied)
}

// proposeN proposes payloads "p1".."pn" one after another.
func proposeN(t *testing.T, m *Member, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		proposeT(t, m, fmt.Sprintf("p%d", i))
	}
}

// segmentFiles lists the log's segment files, oldest first.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	return paths
}

// recordOffsets returns the offset of every record in a segment file.
func recordOffsets(t *testing.T, path string) []int {
	t.Helper()
	offs, _ := scanRecords(t, path)
	return offs
}

// recordsEnd returns the offset just past a segment file's last record,
// where its preallocated zeros begin.
func recordsEnd(t *testing.T, path string) int64 {
	t.Helper()
	_, end := scanRecords(t, path)
	return int64(end)
}

func scanRecords(t *testing.T, path string) (offs []int, end int) {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hdr, _, _, err := parseSegmentHeader(buf)
	if err != nil {
		t.Fatal(err)
	}
	off := hdr
	for len(trimZeros(buf[off:])) > 0 {
		_, n, err := decodeRecord(buf[off:])
		if err != nil {
			t.Fatalf("%s offset %d: %v", path, off, err)
		}
		offs = append(offs, off)
		off += n
	}
	return offs, off
}

// writeBytesAt overwrites path at off with b.
func writeBytesAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// readLog replays the whole log into a fresh state machine and checks its
// entries are densely indexed from 1, with growing zxids and times.
func readLog(t *testing.T, dir string) []Entry {
	t.Helper()
	sm := &memSM{}
	m := openT(t, Config{Dir: dir}, sm)
	closeT(t, m)
	got := sm.snapshot()
	for i, e := range got {
		if e.Index != uint64(i+1) {
			t.Errorf("entry %d has index %d", i, e.Index)
		}
		if i > 0 && (e.Zxid <= got[i-1].Zxid || e.Time < got[i-1].Time) {
			t.Errorf("entry %d: zxid %s time %d after zxid %s time %d", e.Index,
				FormatZxid(e.Zxid), e.Time, FormatZxid(got[i-1].Zxid), got[i-1].Time)
		}
	}
	return got
}

// checkLog checks the log holds exactly payloads want (see readLog).
func checkLog(t *testing.T, dir string, want []string) []Entry {
	t.Helper()
	got := readLog(t, dir)
	var gotData []string
	for _, e := range got {
		gotData = append(gotData, string(e.Data))
	}
	if !slices.Equal(gotData, want) {
		t.Fatalf("log holds %q, want %q", gotData, want)
	}
	return got
}

func payloads(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%d", i+1)
	}
	return out
}

// proposeFromMany runs proposers goroutines that each propose each
// entries one after another, and checks that every proposer gets the
// result of its own entry, at increasing indexes, only once it is applied.
func proposeFromMany(t *testing.T, m *Member, proposers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, proposers)
	for p := range proposers {
		wg.Go(func() {
			var last uint64
			for i := range each {
				data := fmt.Sprintf("proposer %d op %d", p, i)
				v, err := m.Propose(context.Background(), []byte(data))
				if err != nil {
					errs <- err
					return
				}
				r := v.(applied)
				if r.Data != data {
					errs <- fmt.Errorf("proposal %q got the result of %q", data, r.Data)
					return
				}
				if r.Index <= last {
					errs <- fmt.Errorf("proposer %d: index %d after %d", p, r.Index, last)
					return
				}
				last = r.Index
				if got := m.Status().AppliedIndex; got < r.Index {
					errs <- fmt.Errorf("answered for index %d with applied index %d", r.Index, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
