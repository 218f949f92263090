package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/januskv/janus/core"
)

// TestMismatchNewsFollowsTheLog checks that whether a mismatch is logged as
// news (ERROR) or as a known alarm (WARN) depends on the alarm's place in the
// log, not on how the entries happen to be batched into one apply: a
// follower that applies the dissenting report and the leader's alarm in one
// segment has the alarm in its state before it counts the report.
func TestMismatchNewsFollowsTheLog(t *testing.T) {
	raise := core.Entry{Index: 21, Op: core.Op{Alarm: &core.AlarmChange{Activate: true,
		Alarm: core.Alarm{Member: 3, Type: core.AlarmCorrupt}}}}
	report := core.Entry{Index: 20, Op: core.Op{HashReport: &core.HashReport{Member: 3, Index: 10, Hash: 0xbad}}}
	corrupt3 := []core.Alarm{{Member: 3, Type: core.AlarmCorrupt}}
	ok := &core.Result{}
	refused := &core.Result{Err: core.ErrCorrupt}
	tests := []struct {
		name    string
		before  []core.Alarm
		entries []core.Entry
		results []*core.Result
		want    string
	}{
		{"report then alarm in one segment", nil, []core.Entry{report, raise}, []*core.Result{ok, ok}, "level=ERROR"},
		{"report alone", nil, []core.Entry{report}, []*core.Result{ok}, "level=ERROR"},
		{"alarm then report in one segment", nil, []core.Entry{raise, report}, []*core.Result{ok, ok}, "level=WARN"},
		{"alarm raised before the segment", corrupt3, []core.Entry{report}, []*core.Result{ok}, "level=WARN"},
		{"alarm refused, then report", nil, []core.Entry{raise, report}, []*core.Result{refused, ok}, "level=ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs lockedBuffer
			m := &Member{log: slog.New(slog.NewTextHandler(&logs, nil))}
			c := &corruptChecker{m: m, ctx: context.Background(), members: []uint64{1, 2, 3},
				voters: map[uint64]bool{1: true, 2: true, 3: true}, quorum: 2}
			c.running.Store(true)
			// Members 1 and 2 agreed on the check at index 10: it passed.
			c.rounds = []*checkRound{{index: 10, reports: map[uint64]uint64{}}}
			c.report(core.HashReport{Member: 1, Index: 10, Hash: 0x900d}, nil)
			c.report(core.HashReport{Member: 2, Index: 10, Hash: 0x900d}, nil)
			if c.passed.Load() != 1 {
				t.Fatalf("the agreeing reports did not pass the check")
			}

			c.applied(nil, tt.entries, tt.results, tt.before)
			lines := logs.lines("differs from the majority")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) || !strings.Contains(lines[0], "damaged=[3]") {
				t.Fatalf("logged %q, want one %s line naming member 3", lines, tt.want)
			}
		})
	}
}
