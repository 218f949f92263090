// Package accept keeps a server's accept loop alive through errors that
// pass, such as running out of file descriptors: without it, one EMFILE
// ends the loop and the port stays closed for good.
package accept

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Backoff bounds, as net/http's Server.Serve sleeps after a temporary
// accept error.
const (
	firstDelay = 5 * time.Millisecond
	maxDelay   = time.Second
)

// Listener is a net.Listener whose Accept rides out temporary errors: it
// sleeps, 5ms doubling to 1s, and tries again, instead of handing the
// error to the server's accept loop, which would end it. It logs once
// when a burst of failures begins and once when accepting works again,
// not once per attempt: a process out of file descriptors retries about
// once a second for as long as that lasts.
type Listener struct {
	net.Listener
	log  *slog.Logger
	stop chan struct{} // closed by Close, to end a backoff sleep
	once sync.Once
}

// Patient wraps l. log receives the burst messages.
func Patient(l net.Listener, log *slog.Logger) *Listener {
	return &Listener{Listener: l, log: log, stop: make(chan struct{})}
}

// Accept returns the next connection, or a permanent error (the listener
// closed, say).
func (l *Listener) Accept() (net.Conn, error) {
	var (
		delay    time.Duration
		failures int
		first    error
	)
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if failures > 0 {
				l.log.Warn("accepting connections again", "addr", l.Addr().String(), "failed_attempts", failures, "first_err", first)
			}
			return c, nil
		}
		if !Temporary(err) {
			return nil, err
		}
		if failures == 0 {
			first = err
			l.log.Error("accept failing; retrying with backoff until it works", "addr", l.Addr().String(), "err", err)
		}
		failures++
		delay = min(max(2*delay, firstDelay), maxDelay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.stop:
			t.Stop()
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener and ends a backoff sleep.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.stop) })
	return l.Listener.Close()
}

// Temporary reports whether an accept error passes by itself: the process
// or the system is out of file descriptors or buffer memory, or one
// connection was aborted before it was accepted.
func Temporary(err error) bool {
	for _, errno := range []syscall.Errno{
		syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
