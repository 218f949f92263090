package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/januskv/janus/core"
)

// Corruption checks, after etcd's (etcdserver/corrupt.go), with the log as
// the transport instead of peer HTTP requests:
//
//  1. A member proposes a HashCheck entry: the leader every
//     CorruptCheckInterval, and any member once at start-up when
//     InitialCorruptCheck is set.
//  2. Every member, on applying it, opens a View of its state right after
//     that entry (the store applies the entry as the last of its group, so
//     the View is exact) and hashes it in the background
//     (store.View.StateHash).
//     Every member therefore hashes the same point of the log, whatever its
//     applied index when the check began: no two different points are ever
//     compared, and compaction cannot pull the state from under the hash
//     (an open View pins it).
//  3. Each member proposes its hash as a HashReport entry.
//  4. Every member applies the reports in log order and decides alike: the
//     hash that a majority of the voters reported is right, and every member
//     that reported another hash is damaged (etcd's CompactHashCheck rule).
//     If every member reported and no hash has a majority, nobody can be
//     trusted: the alarm names member 0, the whole cluster, as etcd's does.
//  5. The leader proposes a CORRUPT alarm for each damaged member. Alarms
//     are replicated state (core.Meta), so every member lists them; a member
//     with an alarm naming it (or 0) refuses client reads and writes until
//     an operator disarms it.
//
// A round is decided once a hash has a majority of the voters, or once
// every member has reported; a member slow to report delays it but is no
// evidence. A report that arrives after its round was decided is still
// compared with the majority. The last few rounds wait for late reports.
type corruptChecker struct {
	m *Member
	// ctx ends when the member closes; hashes and proposals stop with it.
	ctx context.Context
	// members are every member's ID (voters and observers); quorum is a
	// majority of the voters.
	members []uint64
	voters  map[uint64]bool
	quorum  int

	// running is set once the log has been replayed: entries met during
	// replay are old checks, long decided.
	running atomic.Bool
	// hashing is set while a hash is being computed; a check that begins
	// meanwhile is not reported by this member.
	hashing atomic.Bool

	// rounds are touched only by the apply goroutine.
	rounds []*checkRound
	// passed counts rounds decided without a mismatch.
	passed atomic.Int64

	wg sync.WaitGroup
}

// checkRound is one HashCheck and the reports it has received.
type checkRound struct {
	index    uint64
	rev      int64 // this member's revision at the check, for the log
	reports  map[uint64]uint64
	decided  bool
	majority uint64
	trusted  bool // a majority agreed on majority
}

// keptRounds bounds how many checks wait for late reports.
const keptRounds = 4

// checkRetry is how long a member waits before proposing again when the
// ensemble had no leader; checkRetryFor is how long it keeps trying.
const (
	checkRetry    = 200 * time.Millisecond
	checkRetryFor = time.Minute
)

// checkProposeTimeout bounds one proposal of a check, report or alarm.
const checkProposeTimeout = 10 * time.Second

func newCorruptChecker(ctx context.Context, m *Member) *corruptChecker {
	c := &corruptChecker{m: m, ctx: ctx, voters: map[uint64]bool{}}
	for id := range m.cfg.Peers {
		c.voters[id] = true
		c.members = append(c.members, id)
	}
	for id := range m.cfg.Observers {
		c.members = append(c.members, id)
	}
	if len(c.members) == 0 {
		c.voters[m.cfg.ID] = true
		c.members = []uint64{m.cfg.ID}
	}
	slices.Sort(c.members)
	c.quorum = len(c.voters)/2 + 1
	return c
}

// run proposes the start-up check and then, while this member leads, one
// check every interval, until ctx ends. A single member has nobody to
// compare with and proposes none.
func (c *corruptChecker) run() {
	ctx, cfg := c.ctx, c.m.cfg
	if len(c.members) < 2 {
		return
	}
	if cfg.InitialCorruptCheck {
		for {
			if err := c.propose(ctx, &core.Op{HashCheck: &core.HashCheck{}}); err == nil {
				c.m.log.Info("initial corruption check started")
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(checkRetry):
			}
		}
	}
	if cfg.CorruptCheckInterval <= 0 {
		return
	}
	runEvery(ctx, cfg.CorruptCheckInterval, func() {
		if !c.m.roles.leading.Load() {
			return
		}
		if err := c.propose(ctx, &core.Op{HashCheck: &core.HashCheck{}}); err != nil {
			c.m.log.Warn("propose corruption check", "err", err)
		}
	})
}

// propose puts op in the log past the member's own refusal to serve: a
// damaged member still takes part in checks and alarms. It tries again
// while the ensemble has no leader or changes it, for up to
// checkRetryFor: a report or alarm lost to an election would leave its
// round undecided. A retried op may land twice; reports and alarms are
// idempotent.
func (c *corruptChecker) propose(ctx context.Context, op *core.Op) error {
	deadline := time.Now().Add(checkRetryFor)
	for {
		pctx, cancel := context.WithTimeout(ctx, checkProposeTimeout)
		res, err := c.m.propose(pctx, op)
		cancel()
		if err == nil {
			return res.Err
		}
		transient := errors.Is(err, core.ErrNoLeader) || errors.Is(err, core.ErrLeaderChanged) ||
			errors.Is(err, context.DeadlineExceeded)
		if !transient || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(checkRetry):
		}
	}
}

// applied looks at a segment of applied entries (which ends with the only
// HashCheck it holds, if any): reports are counted, a check begins.
// alarms are the replicated alarms before the segment, results the
// entries' results: the checker follows the segment's alarm changes in log
// order, so that whether a mismatch is news depends on the log alone, not
// on how the entries were batched (the member has applied the whole
// segment, alarms and all, by now).
func (c *corruptChecker) applied(ref *stateRef, entries []core.Entry, results []*core.Result, alarms []core.Alarm) {
	if !c.running.Load() {
		return
	}
	for i, e := range entries {
		switch {
		case e.Op.Alarm != nil:
			if results[i].Err == nil {
				alarms, _ = core.ChangeAlarms(alarms, e.Op.Alarm)
			}
		case e.Op.HashReport != nil:
			c.report(*e.Op.HashReport, alarms)
		case e.Op.HashCheck != nil:
			c.begin(ref, e.Index)
		}
	}
}

// begin starts the round of the check at index, which is the state ref
// shows now, and hashes that state in the background.
func (c *corruptChecker) begin(ref *stateRef, index uint64) {
	ctx := c.ctx
	r := &checkRound{index: index, rev: ref.st.Rev(), reports: map[uint64]uint64{}}
	c.rounds = append(c.rounds, r)
	if len(c.rounds) > keptRounds {
		for _, old := range c.rounds[:len(c.rounds)-keptRounds] {
			if !old.decided && len(old.reports) > 0 {
				c.m.log.Warn("corruption check undecided: too few members reported to tell which one differs",
					"index", old.index, "rev", old.rev, "hashes", c.hashes(old), "members", len(c.members))
			}
		}
		c.rounds = slices.Delete(c.rounds, 0, len(c.rounds)-keptRounds)
	}
	if !c.hashing.CompareAndSwap(false, true) {
		c.m.log.Warn("corruption check skipped: the previous hash is still being computed", "index", index)
		return
	}
	ref.views.Add(1)
	v, err := ref.st.Latest()
	if err != nil {
		ref.views.Done()
		c.hashing.Store(false)
		c.m.log.Warn("corruption check: open state", "index", index, "err", err)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		h, err := v.StateHash(ctx)
		v.Close()
		ref.views.Done()
		c.hashing.Store(false)
		if err != nil {
			if ctx.Err() == nil {
				c.m.log.Warn("corruption check: hash state", "index", index, "err", err)
			}
			return
		}
		rep := &core.HashReport{Member: c.m.cfg.ID, Index: index, Hash: h}
		if err := c.propose(ctx, &core.Op{HashReport: rep}); err != nil && ctx.Err() == nil {
			c.m.log.Warn("corruption check: report hash", "index", index, "err", err)
		}
	}()
}

// report counts one member's hash for its round; alarms are those active
// at the report's place in the log.
func (c *corruptChecker) report(rep core.HashReport, alarms []core.Alarm) {
	i := slices.IndexFunc(c.rounds, func(r *checkRound) bool { return r.index == rep.Index })
	if i < 0 || !slices.Contains(c.members, rep.Member) {
		return // a round this member did not see begin, or forgot
	}
	r := c.rounds[i]
	if _, dup := r.reports[rep.Member]; dup {
		return
	}
	r.reports[rep.Member] = rep.Hash
	if !r.decided {
		c.decide(r, alarms)
		return
	}
	if r.trusted && rep.Hash != r.majority {
		c.mismatch(r, []uint64{rep.Member}, alarms)
	}
}

// decide settles a round once a majority of the voters agree on a hash,
// or once every member has reported. Until then it waits: a member that is
// slow to report is no evidence of anything.
func (c *corruptChecker) decide(r *checkRound, alarms []core.Alarm) {
	byHash := map[uint64][]uint64{}
	for id, h := range r.reports {
		byHash[h] = append(byHash[h], id)
	}
	trusted, found := uint64(0), false
	for h, ids := range byHash {
		votes := 0
		for _, id := range ids {
			if c.voters[id] {
				votes++
			}
		}
		if votes >= c.quorum {
			trusted, found = h, true
		}
	}
	switch {
	case found && len(byHash) == 1:
		r.decided, r.trusted, r.majority = true, true, trusted
		c.passed.Add(1)
		c.m.log.Info("corruption check passed", "index", r.index, "rev", r.rev,
			"reported", len(r.reports), "members", len(c.members), "hash", fmt.Sprintf("%016x", trusted))
	case found:
		r.decided, r.trusted, r.majority = true, true, trusted
		var damaged []uint64
		for id, h := range r.reports {
			if h != trusted {
				damaged = append(damaged, id)
			}
		}
		slices.Sort(damaged)
		c.mismatch(r, damaged, alarms)
	case len(r.reports) == len(c.members):
		// Everyone reported and no hash has a majority: nobody can be
		// trusted, so the alarm names the whole cluster, as etcd's does.
		r.decided = true
		c.mismatch(r, []uint64{0}, alarms)
	}
}

// hashes lists a round's reports as "member=hash", by member.
func (c *corruptChecker) hashes(r *checkRound) string {
	ids := make([]uint64, 0, len(r.reports))
	for id := range r.reports {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d=%016x", id, r.reports[id])
	}
	return strings.Join(parts, " ")
}

// mismatch says which members' states differ and, on the leader, raises
// their CORRUPT alarms. It logs an error when that news is new, and a
// warning while their alarms are already raised (in alarms, the
// replicated alarms at this point of the log).
func (c *corruptChecker) mismatch(r *checkRound, damaged []uint64, alarms []core.Alarm) {
	known := true
	for _, id := range damaged {
		known = known && slices.Contains(alarms, core.Alarm{Member: id, Type: core.AlarmCorrupt})
	}
	log := c.m.log.Error
	if known {
		log = c.m.log.Warn
	}
	log("corruption check: member state differs from the majority's", "damaged", damaged,
		"index", r.index, "rev", r.rev, "hashes", c.hashes(r), "trusted", r.trusted)
	if !c.m.roles.leading.Load() || known {
		return
	}
	for _, id := range damaged {
		op := &core.Op{Alarm: &core.AlarmChange{Activate: true, Alarm: core.Alarm{Member: id, Type: core.AlarmCorrupt}}}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := c.propose(c.ctx, op); err != nil && c.ctx.Err() == nil {
				c.m.log.Warn("raise corruption alarm", "member", id, "err", err)
			}
		}()
	}
}

// Alarms implements core.Backend: the active alarms, as every member lists
// them (etcd's alarm list). Status.Alarms has their names, which health
// checks read: as in etcd, any alarm makes every member unhealthy.
func (m *Member) Alarms() []core.Alarm {
	return localAlarms(m.replicatedAlarms(), m.cfg.ID, m.NoSpace())
}

// replicatedAlarms are the alarms of the current state (core.Meta).
func (m *Member) replicatedAlarms() []core.Alarm {
	if p := m.alarms.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// Auth implements core.Backend: etcd's auth store as this member has
// applied it.
func (m *Member) Auth() *core.AuthState {
	if a := m.auth.Load(); a != nil {
		return a
	}
	return core.Meta{}.AuthState()
}

// alarmNames are the etcd names of alarms' types, each once, in order.
func alarmNames(alarms []core.Alarm) []string {
	var names []string
	for _, a := range alarms {
		if n := a.Type.String(); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// Corrupt says whether a CORRUPT alarm names this member or the whole
// cluster: the member then refuses to answer clients from its state.
func (m *Member) Corrupt() bool {
	p := m.alarms.Load()
	if p == nil {
		return false
	}
	for _, a := range *p {
		if a.Type == core.AlarmCorrupt && (a.Member == m.cfg.ID || a.Member == 0) {
			return true
		}
	}
	return false
}

// loadAlarms reads the alarms (and etcd's auth store, which also lives in
// core.Meta) of the state ref now shows. When the alarms start
// naming this member, the watch hub is replaced: its subscribers (etcd
// watch streams, the ZooKeeper face's event feed) end rather than go on
// receiving events of the damaged state, and new ones are refused.
func (m *Member) loadAlarms(ref *stateRef) error {
	v, err := ref.st.Latest()
	if err != nil {
		return err
	}
	defer v.Close()
	meta, err := v.Meta()
	if err != nil {
		return err
	}
	old, wasCorrupt := m.replicatedAlarms(), m.Corrupt()
	if !slices.Equal(old, meta.Alarms) {
		m.log.Warn("alarms changed", "alarms", meta.Alarms, "before", old)
	}
	alarms := meta.Alarms
	m.alarms.Store(&alarms)
	m.auth.Store(meta.AuthState())
	if m.Corrupt() && !wasCorrupt {
		m.mu.Lock()
		oldHub := m.hub
		if oldHub != nil {
			m.hub = core.NewHub(history{ref.st}, ref.st.Rev(), 0)
		}
		m.mu.Unlock()
		if oldHub != nil {
			oldHub.Close()
		}
	}
	return nil
}
