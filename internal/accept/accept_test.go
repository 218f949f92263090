package accept

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestTemporary(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENOBUFS)}, true},
		{fmt.Errorf("wrapped: %w", syscall.ECONNABORTED), true},
		{net.ErrClosed, false},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EBADF)}, false},
		{errors.New("something else"), false},
	} {
		if got := Temporary(tc.err); got != tc.want {
			t.Errorf("Temporary(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// script is a listener whose Accept returns its errors in turn, then a
// connection, then net.ErrClosed.
type script struct {
	net.Listener
	errs []error
	conn net.Conn
}

func (s *script) Accept() (net.Conn, error) {
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return nil, err
	}
	if c := s.conn; c != nil {
		s.conn = nil
		return c, nil
	}
	return nil, net.ErrClosed
}

func (s *script) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2181} }
func (s *script) Close() error   { return nil }

func TestAcceptRidesOutABurstAndLogsItOnce(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	var logs bytes.Buffer
	l := Patient(&script{errs: []error{emfile, emfile, emfile, emfile}, conn: c1}, slog.New(slog.NewTextHandler(&logs, nil)))
	got, err := l.Accept()
	if err != nil || got != c1 {
		t.Fatalf("Accept = %v, %v; want the connection after the burst", got, err)
	}
	if n := strings.Count(logs.String(), "accept failing"); n != 1 {
		t.Errorf("burst start logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "accepting connections again") || !strings.Contains(logs.String(), "failed_attempts=4") {
		t.Errorf("burst end not logged with its count:\n%s", logs.String())
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after the script = %v, want the permanent error passed on", err)
	}
}

func TestCloseEndsABackoff(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	errs := make([]error, 1000) // longer than any test runs at up to 1s a retry
	for i := range errs {
		errs[i] = emfile
	}
	l := Patient(&script{errs: errs}, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	l.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
}
