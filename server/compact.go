package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zab"
)

// Automatic compaction, after etcd's v3compactor: the leader proposes a
// Compact entry now and then, so history stays bounded even when no client
// ever compacts (ZooKeeper clients never do). The compaction is an entry
// of the log like a client's, so every member compacts at the same
// revision; only the leader of the current epoch proposes it
// (proposeAsLeader), and a new leader starts sampling afresh.

// Compaction modes, etcd's --auto-compaction-mode values.
const (
	CompactPeriodic = "periodic"
	CompactRevision = "revision"
)

// AutoCompaction configures automatic compaction. The zero value turns it
// off.
type AutoCompaction struct {
	// Mode is CompactPeriodic or CompactRevision; "" turns compaction off.
	Mode string
	// Period is how much history periodic mode keeps: it compacts to the
	// revision that was current Period ago.
	Period time.Duration
	// Revisions is how many revisions revision mode keeps: it compacts to
	// the current revision minus Revisions.
	Revisions int64
}

// ParseAutoCompaction reads etcd's --auto-compaction-mode and
// --auto-compaction-retention: in periodic mode the retention is a
// duration ("30m", "1h") or a bare number of hours; in revision mode a
// number of revisions. A retention of 0 turns compaction off, as in etcd.
func ParseAutoCompaction(mode, retention string) (AutoCompaction, error) {
	switch mode {
	case CompactPeriodic:
		if h, err := strconv.ParseInt(retention, 10, 64); err == nil {
			if h < 0 {
				return AutoCompaction{}, fmt.Errorf("auto-compaction retention %q is negative", retention)
			}
			if h == 0 {
				return AutoCompaction{}, nil
			}
			return AutoCompaction{Mode: mode, Period: time.Duration(h) * time.Hour}, nil
		}
		d, err := time.ParseDuration(retention)
		if err != nil {
			return AutoCompaction{}, fmt.Errorf("auto-compaction retention %q is neither a duration nor a number of hours", retention)
		}
		if d < 0 {
			return AutoCompaction{}, fmt.Errorf("auto-compaction retention %q is negative", retention)
		}
		if d == 0 {
			return AutoCompaction{}, nil
		}
		return AutoCompaction{Mode: mode, Period: d}, nil
	case CompactRevision:
		n, err := strconv.ParseInt(retention, 10, 64)
		if err != nil || n < 0 {
			return AutoCompaction{}, fmt.Errorf("auto-compaction retention %q is not a number of revisions", retention)
		}
		if n == 0 {
			return AutoCompaction{}, nil
		}
		return AutoCompaction{Mode: mode, Revisions: n}, nil
	}
	return AutoCompaction{}, fmt.Errorf("auto-compaction mode %q is neither %s nor %s", mode, CompactPeriodic, CompactRevision)
}

// revisionCheckInterval is how often revision mode looks at the revision
// (etcd's revInterval).
const revisionCheckInterval = 5 * time.Minute

// interval is how often the compactor wakes: a tenth of the period (at
// most 6 minutes) in periodic mode, as etcd's retry interval, so that the
// revision kept is never more than a tenth of the period older than asked.
func (c AutoCompaction) interval() time.Duration {
	if c.Mode == CompactRevision {
		return revisionCheckInterval
	}
	return min(c.Period, time.Hour) / 10
}

// revSample is the revision seen at one time.
type revSample struct {
	at  time.Time
	rev int64
}

// compactor decides, tick by tick, the revision to compact to. It holds
// no goroutine: runCompactor drives it.
type compactor struct {
	cfg AutoCompaction
	// samples are the revisions seen, oldest first: the newest one at
	// least Period old and all after it.
	samples []revSample
	// since is when sampling began or the last compaction succeeded;
	// periodic mode waits a Period after the first, and
	// min(Period, 1h) after the others, as etcd's does.
	since     time.Time
	compacted bool
	last      int64 // the last revision compacted to
}

// reset forgets the samples: a member that starts leading starts afresh.
func (c *compactor) reset(now time.Time) {
	c.samples, c.since, c.compacted = nil, now, false
}

// next records that rev is current at now and returns the revision to
// compact to, or 0 for none yet.
func (c *compactor) next(now time.Time, rev int64) int64 {
	if c.cfg.Mode == CompactRevision {
		if to := rev - c.cfg.Revisions; to > 0 && to > c.last {
			return to
		}
		return 0
	}
	c.samples = append(c.samples, revSample{at: now, rev: rev})
	// Keep the newest sample at least a Period old: it is the one to
	// compact to.
	old := -1
	for i, s := range c.samples {
		if now.Sub(s.at) >= c.cfg.Period {
			old = i
		}
	}
	if old < 0 {
		return 0
	}
	c.samples = c.samples[old:]
	wait := c.cfg.Period
	if c.compacted {
		wait = min(c.cfg.Period, time.Hour)
	}
	if now.Sub(c.since) < wait {
		return 0
	}
	if to := c.samples[0].rev; to > c.last {
		return to
	}
	return 0
}

// compactedTo records a compaction to rev (or one a client made already).
func (c *compactor) compactedTo(now time.Time, rev int64) {
	c.last, c.since, c.compacted = rev, now, true
}

// runCompactor proposes compactions while this member leads, until ctx
// ends. ticks wake it (a ticker of the configured interval, or a test's
// channel); it reads the time from the member's clock.
func (m *Member) runCompactor(ctx context.Context, ticks <-chan time.Time) {
	c := &compactor{cfg: m.cfg.AutoCompaction}
	leading := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		m.compactOnce(ctx, c, &leading)
		if looked := m.cfg.compactLooked; looked != nil {
			select {
			case looked <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// compactOnce is one look of the compactor: while this member leads, it
// samples the revision and proposes the compaction that is due.
func (m *Member) compactOnce(ctx context.Context, c *compactor, leading *bool) {
	now := m.cfg.Clock()
	zs := m.zab.Status()
	if !m.roles.leading.Load() || zs.Role != zab.RoleLeader {
		*leading = false
		return
	}
	if !*leading {
		*leading = true
		c.reset(now)
	}
	ref, _ := m.current()
	to := c.next(now, ref.st.Rev())
	if to == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, checkProposeTimeout)
	res, err := m.proposeAsLeader(pctx, zs.Epoch, &core.Op{Compact: &core.Compact{Rev: to}})
	cancel()
	if err == nil {
		err = res.Err
	}
	switch {
	case err == nil:
		m.log.Info("auto-compacted", "mode", c.cfg.Mode, "rev", to)
		c.compactedTo(now, to)
	case errors.Is(err, core.ErrCompacted):
		// A client compacted as far already (Kubernetes does,
		// every five minutes).
		c.compactedTo(now, to)
	default:
		m.log.Warn("auto-compaction", "rev", to, "err", err)
	}
}
