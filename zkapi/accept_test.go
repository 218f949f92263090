package zkapi_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/zkapi"
)

// logBuffer collects a server's log for a test to wait on.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{} // signalled on every write
}

func newLogBuffer() *logBuffer { return &logBuffer{ch: make(chan struct{}, 1)} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.ch <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor returns once the log holds s, or fails the test after a long
// time (a hang guard, not a timing assertion).
func (b *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !strings.Contains(b.String(), s) {
		select {
		case <-b.ch:
		case <-deadline:
			t.Fatalf("the log never said %q:\n%s", s, b.String())
		}
	}
}

// ruok sends ruok on a new connection and returns the answer; a
// connection reset (closed with ruok unread) answers nothing.
func ruok(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		t.Fatalf("ruok: %v", err)
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("ruok: %v", err)
	}
	return string(b)
}

// TestAcceptSurvivesRunningOutOfFiles lowers the process's file limit
// until the server's accept fails with EMFILE, then frees the files: the
// accept loop must back off, log the burst once, and serve again.
func TestAcceptSurvivesRunningOutOfFiles(t *testing.T) {
	logs := newLogBuffer()
	j := startJanus(t, zkapi.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if got := ruok(t, j.Addr); got != "imok" {
		t.Fatalf("ruok = %q before the test", got)
	}

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	low := orig
	low.Cur = uint64(len(entries) + 20)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
				t.Errorf("restore the file limit: %v", err)
			}
		}
	}
	defer restore()

	// Each connection takes a file on both ends. Dial until this side is
	// out of files too; the kernel completes connections the server
	// cannot accept, so its accept fails with EMFILE.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for {
		c, err := net.Dial("tcp", j.Addr)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("dial: %v, want EMFILE", err)
			}
			break
		}
		held = append(held, c)
	}
	logs.waitFor(t, "accept failing; retrying with backoff")

	for _, c := range held {
		c.Close()
	}
	held = nil
	restore()
	if got := ruok(t, j.Addr); got != "imok" {
		t.Fatalf("ruok = %q after the files came free", got)
	}
	logs.waitFor(t, "accepting connections again")
	if n := strings.Count(logs.String(), "accept failing"); n != 1 {
		t.Errorf("the burst was logged %d times, want once:\n%s", n, logs.String())
	}
	// A session starts too, not only a four-letter word.
	c, _ := connect(t, j.Addr, 10*time.Second)
	if _, err := c.Create("/after-emfile", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create after EMFILE: %v", err)
	}
}

// TestConnectionLimits checks maxClientCnxns and maxCnxns as ZooKeeper
// applies them: a connection over a limit is closed before anything is
// read from it, the refusal is logged, and the sessions already open are
// untouched.
func TestConnectionLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  zkapi.Config
		log  string
	}{
		{"per client IP", zkapi.Config{MaxClientConns: 2}, "too many connections from one address"},
		{"in all", zkapi.Config{MaxConns: 2}, "too many connections; closing a new one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := newLogBuffer()
			tc.cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			j := startJanus(t, tc.cfg)
			first, _ := connect(t, j.Addr, 10*time.Second)
			second, _ := connect(t, j.Addr, 10*time.Second)

			// A third client is closed at once: not even ruok is answered.
			if got := ruok(t, j.Addr); got != "" {
				t.Errorf("a third connection got %q, want it closed unanswered", got)
			}
			logs.waitFor(t, tc.log)
			third, events, err := zk.Connect([]string{j.Addr}, 10*time.Second, zk.WithLogger(quietLogger{}))
			if err != nil {
				t.Fatal(err)
			}
			defer third.Close()

			// The sessions within the limit still work.
			for _, c := range []*zk.Conn{first, second} {
				if _, _, err := c.Exists("/"); err != nil {
					t.Errorf("a session within the limit: %v", err)
				}
			}
			// Once one leaves, the waiting client gets its session.
			first.Close()
			deadline := time.After(time.Minute)
			for third.State() != zk.StateHasSession {
				select {
				case <-events:
				case <-deadline:
					t.Fatal("the third client never got a session after one left")
				}
			}
		})
	}
}
