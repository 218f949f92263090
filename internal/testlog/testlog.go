// Package testlog gives tests a log/slog logger that writes to the test's
// own log and fails the test when the code under test logs an ERROR it did
// not expect. An ERROR record means the code met something it could not
// handle; a test that provokes one on purpose (an injected I/O failure, say)
// says so with ExpectErrors, and every other test fails on one instead of
// passing with the error buried in its output.
//
// Records at WARN and above go to t.Log; with JANUS_TEST_LOG set, every
// record down to DEBUG does. The package is imported only by tests.
package testlog

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// Option tunes a logger.
type Option func(*handler)

// ExpectErrors makes ERROR records plain log lines: the test provokes them
// on purpose.
func ExpectErrors() Option { return func(h *handler) { h.shared.expectErrors = true } }

// New returns a logger for the code t tests. Records that arrive after the
// test has ended (from a goroutine that outlived it) are dropped: t.Log may
// not be called then.
func New(t testing.TB, opts ...Option) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("JANUS_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	s := &shared{t: t}
	// A fuzz test's own log may not be written while the fuzz function
	// runs, which is when a server it started logs: its records go to
	// stderr under JANUS_TEST_LOG only, and its ERRORs are reported when it
	// ends.
	_, s.fuzz = t.(*testing.F)
	h := &handler{shared: s, inner: slog.NewTextHandler(sink{s}, &slog.HandlerOptions{Level: level})}
	for _, o := range opts {
		o(h)
	}
	// Registered before any cleanup of the code under test, so it runs after
	// them all (cleanups run last to first): what they log still counts.
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ended = true
		if len(s.deferred) > 0 {
			t.Errorf("%d unexpected ERROR log records (a test that provokes them on purpose says so with testlog.ExpectErrors), the first: %s", len(s.deferred), s.deferred[0])
		}
	})
	return slog.New(h)
}

// shared is the state of a logger and of every handler derived from it.
type shared struct {
	t            testing.TB
	expectErrors bool
	fuzz         bool // t is a *testing.F

	mu       sync.Mutex
	ended    bool
	deferred []string // a fuzz test's unexpected ERROR records
}

// sink writes each formatted record (one Write per record) to the test log.
type sink struct{ s *shared }

func (w sink) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	switch {
	case w.s.ended:
	case w.s.fuzz:
		if os.Getenv("JANUS_TEST_LOG") != "" {
			os.Stderr.Write(p)
		}
	default:
		w.s.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// handler formats records with a text handler into the test log, then
// fails the test on an unexpected ERROR record.
type handler struct {
	shared *shared
	inner  slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || h.inner.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	s := h.shared
	if r.Level < slog.LevelError || s.expectErrors {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ended:
	case s.fuzz:
		s.deferred = append(s.deferred, r.Message)
	default:
		s.t.Errorf("unexpected ERROR log %q (the line above; a test that provokes one on purpose says so with testlog.ExpectErrors)", r.Message)
	}
	return nil
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{shared: h.shared, inner: h.inner.WithAttrs(attrs)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{shared: h.shared, inner: h.inner.WithGroup(name)}
}
