package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/core"
)

func TestParseAutoCompaction(t *testing.T) {
	for _, c := range []struct {
		mode, retention string
		want            AutoCompaction
		bad             bool
	}{
		{"periodic", "1h", AutoCompaction{Mode: "periodic", Period: time.Hour}, false},
		{"periodic", "30m", AutoCompaction{Mode: "periodic", Period: 30 * time.Minute}, false},
		{"periodic", "5", AutoCompaction{Mode: "periodic", Period: 5 * time.Hour}, false}, // etcd: a bare number is hours
		{"periodic", "0", AutoCompaction{}, false},
		{"periodic", "0s", AutoCompaction{}, false},
		{"revision", "1000", AutoCompaction{Mode: "revision", Revisions: 1000}, false},
		{"revision", "0", AutoCompaction{}, false},
		{"revision", "1h", AutoCompaction{}, true},
		{"periodic", "soon", AutoCompaction{}, true},
		{"periodic", "-1", AutoCompaction{}, true},
		{"revision", "-5", AutoCompaction{}, true},
		{"daily", "1", AutoCompaction{}, true},
	} {
		got, err := ParseAutoCompaction(c.mode, c.retention)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParseAutoCompaction(%q, %q) = %+v, %v; want %+v, error %v", c.mode, c.retention, got, err, c.want, c.bad)
		}
	}
}

// TestCompactorDecisions steps the compactor through time as the leader's
// ticks would: periodic mode compacts to the revision seen one period ago,
// first a period after it started, then every min(period, 1h); revision
// mode keeps the last N revisions.
func TestCompactorDecisions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at   time.Duration
		rev  int64
		want int64
	}
	for _, c := range []struct {
		name  string
		cfg   AutoCompaction
		steps []step
	}{
		{"periodic 1h", AutoCompaction{Mode: CompactPeriodic, Period: time.Hour}, []step{
			{0, 10, 0},
			{6 * time.Minute, 20, 0},
			{30 * time.Minute, 50, 0},
			{59 * time.Minute, 90, 0},
			{60 * time.Minute, 100, 10}, // what was current an hour ago
			{66 * time.Minute, 110, 0},  // an hour must pass between compactions
			{96 * time.Minute, 140, 0},
			{120 * time.Minute, 160, 100},
		}},
		{"periodic 10m, sampled late", AutoCompaction{Mode: CompactPeriodic, Period: 10 * time.Minute}, []step{
			{0, 5, 0},
			{7 * time.Minute, 7, 0},
			{13 * time.Minute, 9, 5}, // the newest sample at least 10m old
			{24 * time.Minute, 12, 9},
			{25 * time.Minute, 13, 0}, // 10m must pass between compactions
			{34 * time.Minute, 14, 12},
			{36 * time.Minute, 15, 0},
			{45 * time.Minute, 16, 14},
		}},
		{"periodic 2h compacts hourly", AutoCompaction{Mode: CompactPeriodic, Period: 2 * time.Hour}, []step{
			{0, 1, 0},
			{time.Hour, 2, 0},
			{2 * time.Hour, 3, 1},
			{3 * time.Hour, 4, 2},
		}},
		{"revision 100", AutoCompaction{Mode: CompactRevision, Revisions: 100}, []step{
			{0, 50, 0},
			{5 * time.Minute, 100, 0},
			{10 * time.Minute, 150, 50},
			{15 * time.Minute, 150, 0},
			{20 * time.Minute, 151, 51},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := &compactor{cfg: c.cfg}
			cp.reset(t0)
			for _, s := range c.steps {
				got := cp.next(at(s.at), s.rev)
				if got != s.want {
					t.Fatalf("at %v (rev %d): compact to %d, want %d", s.at, s.rev, got, s.want)
				}
				if got != 0 {
					cp.compactedTo(at(s.at), got)
				}
			}
		})
	}
}

// TestAutoCompactionOnEveryMember runs both modes on three members whose
// compactors a test wakes with a fake clock: the leader's compaction is a
// log entry, so every member refuses reads below the retained revision
// (etcd's "required revision has been compacted") and serves the ones at
// and above it.
func TestAutoCompactionOnEveryMember(t *testing.T) {
	for _, mode := range []AutoCompaction{
		{Mode: CompactPeriodic, Period: time.Hour},
		{Mode: CompactRevision, Revisions: 5},
	} {
		t.Run(mode.Mode, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			c := newReplicaCluster(t)
			ticks := map[uint64]chan time.Time{}
			looked := map[uint64]chan struct{}{}
			for id := uint64(1); id <= 3; id++ {
				ch, done := make(chan time.Time), make(chan struct{})
				ticks[id], looked[id] = ch, done
				c.start(id, func(cfg *MemberConfig) {
					cfg.AutoCompaction = mode
					cfg.Clock = clock.Now
					cfg.compactTicks, cfg.compactLooked = ch, done
					// Elections would start the leader's samples afresh.
					cfg.ElectionTimeout, cfg.HeartbeatInterval = 2*time.Second, 50*time.Millisecond
				})
			}
			// tick wakes every member's compactor once and waits until each
			// has acted on it, so no write races its look.
			tick := func() {
				c.settle() // the leader samples what every member applied
				for id := uint64(1); id <= 3; id++ {
					ticks[id] <- clock.Now()
					<-looked[id]
				}
			}
			m1 := c.members[1]
			write := func(n int) int64 {
				var res *core.Result
				for i := range n {
					res = c.propose(m1, putOp(fmt.Sprintf("k%d", i), "v", 0))
				}
				return res.Rev
			}
			var keep int64
			switch mode.Mode {
			case CompactPeriodic:
				keep = write(10)
				tick() // the leader samples keep at t0
				write(10)
				clock.Advance(30 * time.Minute)
				tick()
				c.settle()
				for id, m := range c.members {
					if cr := m.Status().CompactRev; cr != 0 {
						t.Fatalf("member %d compacted to %d before an hour passed", id, cr)
					}
				}
				write(10)
				clock.Advance(30 * time.Minute)
				tick()
			case CompactRevision:
				rev := write(20)
				tick()
				keep = rev - mode.Revisions
			}
			c.settle()
			for id, m := range c.members {
				if cr := m.Status().CompactRev; cr != keep {
					t.Fatalf("member %d compacted to %d, want %d", id, cr, keep)
				}
				ctx := context.Background()
				if _, err := m.Read(ctx, keep-1); !errors.Is(err, core.ErrCompacted) {
					t.Fatalf("member %d: read at %d: %v, want compacted", id, keep-1, err)
				}
				v, err := m.Read(ctx, keep)
				if err != nil {
					t.Fatalf("member %d: read at %d: %v", id, keep, err)
				}
				v.Close()
				// The same through the etcd face, as a client sees it.
				cli := startFaces(t, m).etcdClient(t)
				if _, err := cli.Get(ctx, "k1", clientv3.WithRev(keep-1)); !errors.Is(err, rpctypes.ErrCompacted) {
					t.Fatalf("member %d: etcd get at %d: %v, want %v", id, keep-1, err, rpctypes.ErrCompacted)
				}
				if _, err := cli.Get(ctx, "k1", clientv3.WithRev(keep)); err != nil {
					t.Fatalf("member %d: etcd get at %d: %v", id, keep, err)
				}
			}
		})
	}
}
