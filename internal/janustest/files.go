package janustest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RunOutOfFiles lowers the process's file limit (RLIMIT_NOFILE) to a few
// above the files open now and dials addr until this side gets EMFILE.
// Each connection takes a file on both ends, and the kernel completes
// connections the server cannot accept, so the server's accept fails
// with EMFILE too. release closes the connections and restores the limit;
// it also runs at the end of the test. Tests that call it must not run in
// parallel with others: the limit is the whole process's.
func RunOutOfFiles(t testing.TB, addr string) (release func()) {
	t.Helper()
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	low := orig
	low.Cur = uint64(len(open) + 20)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	var held []net.Conn
	var once sync.Once
	release = func() {
		once.Do(func() {
			for _, c := range held {
				c.Close()
			}
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
				t.Errorf("restore the file limit: %v", err)
			}
		})
	}
	t.Cleanup(release)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				release()
				t.Fatalf("dial %s: %v, want EMFILE", addr, err)
			}
			return release
		}
		held = append(held, c)
	}
}

// LogWaiter is a log destination a test can wait on.
type LogWaiter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{} // signalled on every write
}

// NewLogWaiter returns an empty LogWaiter.
func NewLogWaiter() *LogWaiter { return &LogWaiter{ch: make(chan struct{}, 1)} }

func (l *LogWaiter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

// String returns everything logged so far.
func (l *LogWaiter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// WaitFor returns once one line of the log holds every part, or fails the
// test after a minute (a guard against hanging, not a timing assertion).
func (l *LogWaiter) WaitFor(t testing.TB, parts ...string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		text := l.String()
		for line := range strings.SplitSeq(text, "\n") {
			found := true
			for _, p := range parts {
				found = found && strings.Contains(line, p)
			}
			if found {
				return
			}
		}
		select {
		case <-l.ch:
		case <-deadline:
			t.Fatalf("the log never said %q:\n%s", parts, text)
		}
	}
}
