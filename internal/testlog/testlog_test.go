package testlog

import (
	"fmt"
	"strings"
	"testing"
)

// recorder stands in for the test: it records what the logger does to it.
type recorder struct {
	testing.TB
	logs, errs []string
}

func (r *recorder) Log(args ...any) { r.logs = append(r.logs, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestUnexpectedErrorFailsTheTest(t *testing.T) {
	rec := &recorder{TB: t}
	log := New(rec).With("node", 1).WithGroup("g")
	log.Info("chatter")
	log.Warn("something odd", "k", "v")
	if len(rec.errs) != 0 {
		t.Fatalf("a WARN failed the test: %v", rec.errs)
	}
	if len(rec.logs) != 1 || !strings.Contains(rec.logs[0], "something odd") || !strings.Contains(rec.logs[0], "node=1") || !strings.Contains(rec.logs[0], "g.k=v") {
		t.Fatalf("logged %q, want only the WARN line with its attributes", rec.logs)
	}
	log.Error("disk on fire")
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "disk on fire") {
		t.Fatalf("an ERROR left errors %q, want one naming it", rec.errs)
	}
}

func TestExpectedErrorIsOnlyLogged(t *testing.T) {
	rec := &recorder{TB: t}
	New(rec, ExpectErrors()).Error("injected I/O failure")
	if len(rec.errs) != 0 || len(rec.logs) != 1 {
		t.Fatalf("an expected ERROR: errors %q, logs %q; want only a log line", rec.errs, rec.logs)
	}
}

func TestRecordsAfterTheTestAreDropped(t *testing.T) {
	rec := &recorder{TB: t}
	var log = New(rec)
	// What New's cleanup does when the test ends.
	h := log.Handler().(*handler)
	h.shared.ended = true
	log.Error("late")
	if len(rec.errs) != 0 || len(rec.logs) != 0 {
		t.Fatalf("a record after the end reached the test: %q %q", rec.errs, rec.logs)
	}
}
