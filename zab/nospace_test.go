package zab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/januskv/janus/internal/testenv"
)

// fullFS is the operating system's filesystem with a disk that fills on
// demand: creating a file or preallocating fails with ENOSPC, and a write
// lands in part (its first half) before failing with ENOSPC, as a write
// that runs out of blocks part way does.
type fullFS struct {
	fileSystem
	noAllocate bool // Allocate is refused as on a filesystem without fallocate
	failCreate atomic.Bool
	failWrite  atomic.Bool
}

func (fsys *fullFS) OpenFile(path string, flag int) (logFile, error) {
	if flag&os.O_CREATE != 0 && fsys.failCreate.Load() {
		return nil, &os.PathError{Op: "open", Path: path, Err: unix.ENOSPC}
	}
	f, err := fsys.fileSystem.OpenFile(path, flag)
	if err != nil {
		return nil, err
	}
	return fullFile{f, fsys}, nil
}

type fullFile struct {
	logFile
	fsys *fullFS
}

func (f fullFile) Allocate(size int64) error {
	if f.fsys.noAllocate {
		return fmt.Errorf("%w: %s", errNoPreallocate, f.Name())
	}
	if f.fsys.failCreate.Load() {
		return fmt.Errorf("fallocate %s: %w", f.Name(), unix.ENOSPC)
	}
	return f.logFile.Allocate(size)
}

// WriteAt fails writes of data; zeros written back over a failed write
// land in blocks the failed write already had.
func (f fullFile) WriteAt(b []byte, off int64) (int, error) {
	if !f.fsys.failWrite.Load() || !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		return f.logFile.WriteAt(b, off)
	}
	n, err := f.logFile.WriteAt(b[:len(b)/2], off)
	if err != nil {
		return n, err
	}
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: unix.ENOSPC}
}

// A group the disk refuses (no room for a new segment, or a write that
// runs out of blocks part way) leaves the log as it was: the append says
// nothing was written, the next append at the same indexes succeeds, and
// the reopened log holds exactly what was appended successfully, with no
// torn tail to cut.
func TestWALAppendRefusedForSpaceLeavesTheLogWhole(t *testing.T) {
	for _, tc := range []struct {
		name       string
		noAllocate bool
		create     bool // the fault is in creating the next segment
		dataSize   int
	}{
		{"new segment, preallocated", false, true, 400},
		{"new segment, not preallocated", true, true, 400},
		{"write inside the preallocation", false, false, 20},
		{"write past the preallocation", false, false, 400},
		{"write, not preallocated", true, false, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fsys := &fullFS{fileSystem: osFS{}, noAllocate: tc.noAllocate}
			var logs logBuffer
			w, err := openWAL(fsys, dir, logs.logger(), 300)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.reset(1); err != nil {
				t.Fatal(err)
			}
			var want []Entry
			appendOK := func(ents []Entry) {
				t.Helper()
				if err := w.append(ents); err != nil {
					t.Fatalf("append %d-%d: %v", ents[0].Index, ents[len(ents)-1].Index, err)
				}
				want = append(want, ents...)
			}
			for i := range 7 {
				appendOK(walEntries(uint64(i+1), 1, uint32(i+1), 1))
			}
			refused := walEntries(8, 1, 8, 3)
			for i := range refused {
				refused[i].Data = []byte(strings.Repeat("x", tc.dataSize))
			}
			if tc.create {
				fsys.failCreate.Store(true)
			} else {
				fsys.failWrite.Store(true)
			}
			for range 2 { // and again, with no active segment after a failed roll
				err = w.append(refused)
				if !refusedForSpace(err) {
					t.Fatalf("append on a full disk: %v, want a refusal that wrote nothing", err)
				}
			}
			if w.lastIndex != 7 {
				t.Fatalf("last index %d after the refusal, want 7", w.lastIndex)
			}
			fsys.failCreate.Store(false)
			fsys.failWrite.Store(false)
			// Other entries at the same indexes, as the next group takes them.
			appendOK(walEntries(8, 1, 8, 2))
			appendOK(walEntries(10, 1, 10, 4))
			w.close()

			logs = logBuffer{}
			w, err = openWAL(osFS{}, dir, logs.logger(), 300)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer w.close()
			if s := logs.String(); strings.Contains(s, "torn") {
				t.Errorf("reopening cut a torn tail; the refused write should have left none:\n%s", s)
			}
			if got := readAll(t, w); !slices.EqualFunc(got, want, sameEntry) {
				t.Fatalf("reopened log holds %d entries, want the %d appended", len(got), len(want))
			}
		})
	}
}

// A single member whose disk is full refuses proposals with ErrNoSpace
// and keeps running: what it applied stays applied, NoSpace says why, and
// once the disk takes writes again the next proposal commits, continuing
// the zxids as if the refused ones had never been.
func TestMemberRefusesWritesWhileTheDiskIsFull(t *testing.T) {
	dir := t.TempDir()
	var full atomic.Bool
	check := func(int64) error {
		if full.Load() {
			return fmt.Errorf("test disk: %w", unix.ENOSPC)
		}
		return nil
	}
	sm := &memSM{}
	m := openT(t, Config{Dir: dir, CheckSpace: check}, sm)
	proposeN(t, m, 3)
	before := m.Status()

	full.Store(true)
	for i := range 3 {
		_, err := m.Propose(context.Background(), []byte(fmt.Sprintf("refused%d", i)))
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("Propose on a full disk: %v, want ErrNoSpace wrapping ENOSPC", err)
		}
	}
	if m.NoSpace() == nil {
		t.Fatal("NoSpace is nil while writes are refused")
	}
	if st := m.Status(); st.Stopped || st.AppliedIndex != before.AppliedIndex || st.LastZxid != before.LastZxid {
		t.Fatalf("status after refusals %+v, want the member running as before (%+v)", st, before)
	}
	if m.Err() != nil {
		t.Fatalf("member failed: %v", m.Err())
	}

	full.Store(false)
	proposeT(t, m, "p4")
	if err := m.NoSpace(); err != nil {
		t.Fatalf("NoSpace after a write succeeded: %v", err)
	}
	if st := m.Status(); st.LastZxid != before.LastZxid+1 {
		t.Errorf("zxid after recovery %#x, want %#x (the refused groups used none)", st.LastZxid, before.LastZxid+1)
	}
	closeT(t, m)
	checkLog(t, dir, []string{"p1", "p2", "p3", "p4"})
}

// A single member looks at its disk once for all the proposals one turn
// of its loop took; when they do not fit together, it asks for each alone,
// so a proposal the disk can take is never refused for its neighbours'
// sake, and the others keep their order.
func TestLoneLeaderChecksATurnsProposalsTogether(t *testing.T) {
	dir := t.TempDir()
	const room = 200 // bytes the test disk takes at once
	var mu sync.Mutex
	var asked []int64
	check := func(need int64) error {
		mu.Lock()
		asked = append(asked, need)
		mu.Unlock()
		if need > room {
			return fmt.Errorf("test disk, %d bytes: %w", need, unix.ENOSPC)
		}
		return nil
	}
	m := openT(t, Config{Dir: dir, CheckSpace: check}, &memSM{})
	proposeT(t, m, "p0")

	// Hold the loop so that the proposals queue up and one turn takes them.
	release := make(chan struct{})
	held := make(chan struct{})
	m.rep.inbox <- loopEvent{onLoop: func(*Core) { close(held); <-release }}
	<-held
	payloads := []string{
		"a" + strings.Repeat("-", 59),
		"b" + strings.Repeat("-", 59),
		"c" + strings.Repeat("-", room), // more than the disk takes
		"d" + strings.Repeat("-", 59),
	}
	errs := make([]chan error, len(payloads))
	for i, p := range payloads {
		errs[i] = make(chan error, 1)
		go func() {
			_, err := m.Propose(context.Background(), []byte(p))
			errs[i] <- err
		}()
		for len(m.rep.inbox) < i+1 { // queued in this order
			time.Sleep(time.Millisecond)
		}
	}
	mu.Lock()
	asked = nil
	mu.Unlock()
	close(release)
	for i, p := range payloads {
		err := <-errs[i]
		if wantRefused := len(p) > room; wantRefused != errors.Is(err, ErrNoSpace) {
			t.Errorf("proposal %c of %d bytes: %v", p[0], len(p), err)
		}
	}
	mu.Lock()
	first := asked[0]
	mu.Unlock()
	if want := int64(3*60 + room + 1); first != want {
		t.Errorf("first look at the disk asked for %d bytes, want %d: the whole turn", first, want)
	}
	closeT(t, m)
	checkLog(t, dir, []string{"p0", payloads[0], payloads[1], payloads[3]})
}

// A replicated member's log writer keeps entries the disk refuses and
// writes them, in order, once it takes writes again; meanwhile nothing is
// reported durable and noSpaceErr says why.
func TestLogWriterHoldsEntriesWhileTheDiskIsFull(t *testing.T) {
	w := openTestWAL(t, t.TempDir())
	var full atomic.Bool
	full.Store(true)
	checked := make(chan struct{}, 1)
	check := func(int64) error {
		defer signal(checked)
		if full.Load() {
			return fmt.Errorf("test disk: %w", unix.ENOSPC)
		}
		return nil
	}
	lw := newLogWriter(w, 0, check, time.Millisecond)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		lw.run()
	}()
	want := walEntries(1, 1, 1, 50)
	lw.enqueue(want[:20])
	<-checked
	lw.enqueue(want[20:])
	<-checked
	<-checked // a retry, which saw the later entries queued too
	if d, err := lw.state(); d != 0 || err != nil {
		t.Fatalf("writer state on a full disk: durable %d, err %v; want 0, nil", d, err)
	}
	if lw.noSpaceErr() == nil {
		t.Fatal("noSpaceErr is nil while the disk refuses writes")
	}
	full.Store(false)
	for {
		<-lw.done
		d, err := lw.state()
		if err != nil {
			t.Fatal(err)
		}
		if d == 50 {
			break
		}
	}
	if err := lw.noSpaceErr(); err != nil {
		t.Fatalf("noSpaceErr after the writes went through: %v", err)
	}
	lw.close()
	<-stopped
	if got := readAll(t, w); !slices.EqualFunc(got, want, sameEntry) {
		t.Fatalf("log holds %d entries, want the 50 handed over in order", len(got))
	}
}

// On a real, small file system that fills up, the log refuses the group
// that needs a new segment, keeps every acknowledged entry, and takes
// writes again once space is freed, without a restart.
func TestMemberOnAFullTmpfs(t *testing.T) {
	dir := testenv.MountTmpfs(t, 1<<20)
	logDir := filepath.Join(dir, "log")
	m := openT(t, Config{Dir: logDir, SegmentSize: 64 << 10, NoSpaceRetry: 10 * time.Millisecond}, &memSM{})
	proposeN(t, m, 3)
	filler := filepath.Join(dir, "filler")
	testenv.FillDisk(t, filler)
	// Proposals commit until one finds the disk full: the writer holds it
	// (it is in the Core's log already) and tries again until the disk
	// takes it, while new proposals are refused.
	var (
		acked    []string
		held     chan error
		heldData string
	)
	for i := 1; held == nil; i++ {
		if i > 1000 {
			t.Fatal("the log never ran out of space")
		}
		data := fmt.Sprintf("fill%d-%s", i, strings.Repeat("x", 1000))
		pd, err := m.Submit(context.Background(), []byte(data))
		if err != nil {
			t.Fatalf("Submit %d: %v", i, err)
		}
		res := make(chan error, 1)
		go func() { _, err := pd.Wait(context.Background()); res <- err }()
	wait:
		for {
			select {
			case err := <-res:
				if err != nil {
					t.Fatalf("Propose %d: %v", i, err)
				}
				acked = append(acked, data)
				break wait
			default:
			}
			if m.NoSpace() != nil {
				held, heldData = res, data
				break wait
			}
			time.Sleep(time.Millisecond)
		}
	}
	_, err := m.Propose(context.Background(), []byte("refused"))
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Propose while the disk is full: %v, want ErrNoSpace wrapping ENOSPC", err)
	}
	if m.Err() != nil || m.NoSpace() == nil {
		t.Fatalf("after ENOSPC: Err %v, NoSpace %v; want running and NoSpace set", m.Err(), m.NoSpace())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the proposal held while the disk was full: %v", err)
	}
	acked = append(acked, heldData)
	proposeT(t, m, "after")
	if m.NoSpace() != nil {
		t.Fatalf("NoSpace after a write succeeded: %v", m.NoSpace())
	}
	closeT(t, m)
	want := append(append([]string{"p1", "p2", "p3"}, acked...), "after")
	sm := &memSM{}
	closeT(t, openT(t, Config{Dir: logDir, SegmentSize: 64 << 10}, sm))
	var got []string
	for _, e := range sm.snapshot() {
		got = append(got, string(e.Data))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("reopened log holds %d entries, want the %d acknowledged", len(got), len(want))
	}
	t.Logf("%d entries acknowledged before the disk filled", len(acked))
}

// slowSyncFS is a filesystem whose fdatasync takes longer than etcd's
// expected duration.
type slowSyncFS struct{ fileSystem }

func (fsys slowSyncFS) OpenFile(path string, flag int) (logFile, error) {
	f, err := fsys.fileSystem.OpenFile(path, flag)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{f}, nil
}

type slowSyncFile struct{ logFile }

func (f slowSyncFile) Datasync() error {
	time.Sleep(slowSyncWarning + 10*time.Millisecond) // a lower bound: never flaky
	return f.logFile.Datasync()
}

// A slow fdatasync is logged the way etcd logs it, so that alerts written
// for etcd fire.
func TestSlowFdatasyncIsLoggedLikeEtcd(t *testing.T) {
	var logs logBuffer
	w, err := openWAL(slowSyncFS{osFS{}}, t.TempDir(), logs.logger(), 300)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.reset(1); err != nil {
		t.Fatal(err)
	}
	if err := w.append(walEntries(1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{`msg="slow fdatasync"`, "took=", "expected-duration=1s"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}
