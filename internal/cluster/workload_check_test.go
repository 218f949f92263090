package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkloadThatDidNothingFails gives the workload's progress checks a
// run in which every client call failed: the run must fail, not pass with
// nothing to check, both over the run (Check) and after a fault
// (WaitProgress).
func TestWorkloadThatDidNothingFails(t *testing.T) {
	r := &Results{w: Workload{MinAcks: 10}, acks: map[string]int{}, failures: map[string]int{"etcd": 500, "zk": 300}}
	for _, k := range Kinds {
		r.acks[k] = 10
	}
	if p := r.tooLittle(); len(p) != 0 {
		t.Fatalf("a run that did enough fails: %v", p)
	}
	before := r.Acks()
	r.acks["lock hold"] = 9
	if p := r.tooLittle(); len(p) != 1 || !strings.Contains(p[0], "lock hold") {
		t.Fatalf("a run with too few lock holds: %v, want one problem naming them", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := r.WaitProgress(ctx, before, 1)
	if err == nil || !strings.Contains(err.Error(), "zk set") {
		t.Fatalf("no progress after a fault: %v, want an error naming the kinds", err)
	}
	r.acks["lock hold"] = 10
	for _, k := range Kinds {
		r.ack(k)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.WaitProgress(ctx, before, 1); err != nil {
		t.Fatalf("progress of every kind: %v", err)
	}
}

// TestErrorLinesFindsErrorRecords checks what a cluster test fails on
// when a member logs an ERROR record.
func TestErrorLinesFindsErrorRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.log")
	log := `time=2026-01-01T00:00:00Z level=INFO msg="member started"
time=2026-01-01T00:00:01Z level=WARN msg="slow fsync"
time=2026-01-01T00:00:02Z level=ERROR msg="apply failed" err="disk"
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got := errorLines(path)
	if len(got) != 1 || !strings.Contains(got[0], "apply failed") {
		t.Fatalf("errorLines = %q, want the one ERROR record", got)
	}
}
