package zkapi_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/zkapi"
)

// ruok sends ruok on a new connection and returns the answer; a
// connection reset (closed with ruok unread) answers nothing.
func ruok(t *testing.T, addr string) string {
	t.Helper()
	return sendWord(t, addr, "ruok")
}

// sendWord sends a four-letter word on a new connection and returns the
// answer, as ruok does.
func sendWord(t *testing.T, addr, word string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		t.Fatalf("%s: %v", word, err)
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: %v", word, err)
	}
	return string(b)
}

// TestAcceptSurvivesRunningOutOfFiles runs the process out of files until
// the server's accept fails with EMFILE, then frees them: the accept loop
// must back off, log the burst once, and serve again.
func TestAcceptSurvivesRunningOutOfFiles(t *testing.T) {
	logs := janustest.NewLogWaiter()
	j := startJanus(t, zkapi.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), FourLetterWhitelist: []string{"ruok"}})
	if got := ruok(t, j.Addr); got != "imok" {
		t.Fatalf("ruok = %q before the test", got)
	}

	release := janustest.RunOutOfFiles(t, j.Addr)
	logs.WaitFor(t, "accept failing; retrying with backoff")

	release()
	if got := ruok(t, j.Addr); got != "imok" {
		t.Fatalf("ruok = %q after the files came free", got)
	}
	logs.WaitFor(t, "accepting connections again")
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
		{"per client IP", zkapi.Config{MaxClientConns: 2, FourLetterWhitelist: []string{"ruok"}}, "too many connections from one address"},
		{"in all", zkapi.Config{MaxConns: 2, FourLetterWhitelist: []string{"ruok"}}, "too many connections; closing a new one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := janustest.NewLogWaiter()
			tc.cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			j := startJanus(t, tc.cfg)
			first, _ := connect(t, j.Addr, 10*time.Second)
			second, _ := connect(t, j.Addr, 10*time.Second)

			// A third client is closed at once: not even ruok is answered.
			if got := ruok(t, j.Addr); got != "" {
				t.Errorf("a third connection got %q, want it closed unanswered", got)
			}
			logs.WaitFor(t, tc.log)
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

// TestFourLetterWhitelistDefault checks the zero Config serves ZooKeeper
// 3.8's default whitelist: srvr, and none of the words that list sessions,
// client addresses or the environment.
func TestFourLetterWhitelistDefault(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	if got := sendWord(t, j.Addr, "srvr"); !strings.HasPrefix(got, "Zookeeper version: ") {
		t.Errorf("srvr = %q", got)
	}
	for _, w := range []string{"cons", "dump", "envi", "wchc", "wchp", "stat", "mntr", "conf", "ruok", "crst", "srst"} {
		if got, want := sendWord(t, j.Addr, w), w+" is not executed because it is not in the whitelist.\n"; got != want {
			t.Errorf("%s = %q, want %q", w, got, want)
		}
	}
}
