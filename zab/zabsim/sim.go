package zabsim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/januskv/janus/zab"
)

// Sabotage breaks one rule of the driver's Ready contract on purpose, to
// show that the invariants catch a driver (or core) that breaks it. Only
// tests set it; the core is never sabotaged.
type Sabotage uint8

const (
	// SabotageNone obeys the contract.
	SabotageNone Sabotage = iota
	// SabotageEarlyDurable reports entries durable (LogDurable) as soon as
	// they are handed to the writer, before their fsync: an ACK before
	// fsync.
	SabotageEarlyDurable
	// SabotageLateEpochs sends a Ready's messages before its epochs are
	// persisted, persisting them only at the member's next fsync.
	SabotageLateEpochs
	// SabotageLazySync installs a synchronization's entries through the
	// ordinary group write instead of durably before its messages go out.
	SabotageLazySync
	// SabotageForgetMembership never persists Ready.Membership: a
	// restarted member starts again from its starting configuration.
	SabotageForgetMembership
)

func (s Sabotage) String() string {
	switch s {
	case SabotageNone:
		return "none"
	case SabotageEarlyDurable:
		return "early-durable"
	case SabotageLateEpochs:
		return "late-epochs"
	case SabotageLazySync:
		return "lazy-sync"
	case SabotageForgetMembership:
		return "forget-membership"
	}
	return fmt.Sprintf("Sabotage(%d)", uint8(s))
}

// Options tune a run beyond its trace.
type Options struct {
	Sabotage Sabotage
	// LivenessTicks bounds the liveness phase: after the faulty phase
	// every fault is healed, and within this many ticks of the slowest
	// clock a leader must be established and a proposal committed
	// (default 300).
	LivenessTicks int
	// EndToEndOnly leaves out the checks of what each Ready asks against
	// the member's disk (an ACK naming an entry not yet durable, ACKEPOCH
	// before its epoch is persisted, ...) and keeps only the invariants
	// on the ensemble's history, to measure how soon a broken rule shows
	// as lost data or two leaders.
	EndToEndOnly bool
	// IgnoreRefusals turns off the check that a proposal refused with
	// ErrNoLeader ("nothing proposed") never commits. The core once broke
	// it when the network duplicated a forwarded REQUEST: the leader
	// proposed the first copy, lost its quorum, answered the late copy
	// with REQUESTFAIL, and the origin refused with ErrNoLeader a proposal
	// that the next epoch committed (testdata/requestfail.trace).
	IgnoreRefusals bool
	// Log, if set, receives a line per external event and per role
	// change (for replaying a failure by eye); with LogMessages, also one
	// per message delivered (heartbeats aside).
	Log         func(format string, args ...any)
	LogMessages bool
}

// Stats count what a run (or many) did.
type Stats struct {
	Runs      int
	Steps     int
	Events    int            // external events fired
	Faults    map[string]int // by kind
	Checks    map[string]int // invariant checks, by invariant
	Proposals int
	Acked     int
	Reads     int // read indexes answered
	Elections int // leaderships established
	// Reconfigs counts the configurations that committed (each version
	// once, however many members persisted it).
	Reconfigs int
}

func newStats() *Stats { return &Stats{Faults: map[string]int{}, Checks: map[string]int{}} }

// Add folds o into s.
func (s *Stats) Add(o *Stats) {
	s.Runs += o.Runs
	s.Steps += o.Steps
	s.Events += o.Events
	s.Proposals += o.Proposals
	s.Acked += o.Acked
	s.Reads += o.Reads
	s.Elections += o.Elections
	s.Reconfigs += o.Reconfigs
	if s.Faults == nil {
		s.Faults, s.Checks = map[string]int{}, map[string]int{}
	}
	for k, v := range o.Faults {
		s.Faults[k] += v
	}
	for k, v := range o.Checks {
		s.Checks[k] += v
	}
}

// Result is what a run found.
type Result struct {
	// Trace is the run's trace: the events it fired (for a generated run,
	// the ones drawn from the seed).
	Trace *Trace
	// Err is the first broken invariant (a *Violation), or nil.
	Err   error
	Stats *Stats
}

// sim is one run: the members, the network, the clocks, the agenda.
type sim struct {
	opts    Options
	trace   *Trace // recorded as events fire
	src     source
	ag      agenda
	now     int64
	step    int
	net     *network
	nodes   map[uint64]*node
	ids     []uint64
	voters  []uint64
	rng     *rand.Rand // the members' clocks and disks
	chk     *checker
	stats   *Stats
	err     error
	maxTick int64
	// liveness phase
	live      bool
	liveSince int64
	probes    map[[2]uint64]bool // proposals made in the liveness phase
	probeRng  *rand.Rand
	liveDone  bool
	// versions are the configuration versions some member persisted.
	versions map[uint64]bool
}

// Generate runs the seed's own schedule of faults and proposals.
func Generate(seed uint64, voters, observers, steps int, opts Options) *Result {
	return GenerateWithSpares(seed, voters, observers, 0, steps, opts)
}

// GenerateWithSpares is Generate for an ensemble with spares: members
// outside it that membership changes (EvReconfig, drawn among the faults)
// may add, then promote or remove, one change at a time.
func GenerateWithSpares(seed uint64, voters, observers, spares, steps int, opts Options) *Result {
	t := &Trace{Seed: seed, Voters: voters, Observers: observers, Spares: spares, Steps: steps}
	s := newSim(t, opts)
	s.src = newGenerator(rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), s.voters, s.ids, s.ids[voters+observers:])
	return s.run()
}

// Replay runs a trace (one a run printed, perhaps shrunk) exactly.
func Replay(t *Trace, opts Options) *Result {
	s := newSim(&Trace{Seed: t.Seed, Voters: t.Voters, Observers: t.Observers, Spares: t.Spares, Steps: t.Steps}, opts)
	s.src = &replaySource{events: slices.Clone(t.Events)}
	return s.run()
}

func newSim(t *Trace, opts Options) *sim {
	if opts.LivenessTicks <= 0 {
		opts.LivenessTicks = 300
	}
	s := &sim{
		opts:     opts,
		trace:    t,
		nodes:    map[uint64]*node{},
		rng:      rand.New(rand.NewPCG(t.Seed, 1)),
		probeRng: rand.New(rand.NewPCG(t.Seed, 2)),
		stats:    newStats(),
		probes:   map[[2]uint64]bool{},
		versions: map[uint64]bool{},
	}
	s.stats.Runs = 1
	s.chk = newChecker(func() (int, int64) { return s.step, s.now })
	s.chk.checks = s.stats.Checks
	s.chk.refusals = !opts.IgnoreRefusals
	s.net = newNetwork(t.Seed, s.stats)
	var observers []uint64
	for i := 1; i <= t.Voters+t.Observers+t.Spares; i++ {
		id := uint64(i)
		s.ids = append(s.ids, id)
		switch {
		case i <= t.Voters:
			s.voters = append(s.voters, id)
		case i <= t.Voters+t.Observers:
			observers = append(observers, id)
		}
	}
	start, err := zab.NewMembership(s.voters, observers)
	if err != nil {
		panic(fmt.Sprintf("zabsim: trace with %d voters: %v", t.Voters, err)) // ParseTrace and the tests never make one
	}
	for i, id := range s.ids {
		// Each member's clock runs at its own rate: a tick every 70 to 130
		// virtual milliseconds, and a wall clock off by up to a second.
		period := int64(70 + s.rng.IntN(61))
		s.maxTick = max(s.maxTick, period)
		s.nodes[id] = &node{s: s, id: id, disk: &disk{}, tickPeriod: period, clockOffset: s.rng.Int64N(2000) - 1000,
			fsyncMax: 2 + s.rng.Int64N(maxFsync), joined: i < t.Voters+t.Observers, spare: i >= t.Voters+t.Observers, startConf: start}
	}
	// In one run in four, one voter's disk lags far behind the others,
	// most often the highest ID's (the likeliest leader): a leader then
	// proposes long before its own write is durable, and its followers
	// commit entries it does not yet hold on disk. Drawn from its own
	// stream, so the rest of a run's randomness stays what it was.
	if slow := rand.New(rand.NewPCG(t.Seed, 3)); len(s.voters) > 1 && slow.IntN(4) == 0 {
		id := s.voters[len(s.voters)-1]
		if slow.IntN(2) == 0 {
			id = s.voters[slow.IntN(len(s.voters))]
		}
		s.nodes[id].fsyncMax = slowFsync
	}
	return s
}

func (s *sim) logf(format string, args ...any) {
	if s.opts.Log != nil {
		s.opts.Log("t=%d step=%d "+format, append([]any{s.now, s.step}, args...)...)
	}
}

// fail records the first broken invariant; the run stops after the step.
func (s *sim) fail(err error) {
	if err != nil && s.err == nil {
		s.err = err
	}
}

func (s *sim) run() *Result {
	for _, id := range s.ids {
		if s.nodes[id].joined {
			s.nodes[id].start()
		}
	}
	s.scheduleExternal()
	for s.err == nil && s.step < s.trace.Steps {
		if !s.runOne() {
			break
		}
	}
	if s.err == nil {
		s.liveness()
	}
	s.stats.Steps = s.step
	return &Result{Trace: s.trace, Err: s.err, Stats: s.stats}
}

// runOne runs the next event of the agenda and checks every member.
func (s *sim) runOne() bool {
	it := s.ag.pop()
	if it == nil {
		return false
	}
	if it.kind == evExternal && s.live {
		// Drawn before the faulty phase ended, and never fired: a replay
		// of the trace does not have it.
		return true
	}
	s.now = it.at
	s.step++
	switch it.kind {
	case evExternal:
		s.trace.Events = append(s.trace.Events, it.ext)
		s.external(it.ext)
		s.scheduleExternal()
	case evProbe:
		s.probe()
	case evDeliver:
		// The network does not know incarnations: whatever runs at the
		// address gets it, as a message in flight across a restart would.
		// A link cut while the message was in flight drops it too.
		if n := s.nodes[it.to]; n.up && s.net.open(it.from, it.to) {
			if s.opts.LogMessages && it.msg.Type != zab.MsgHeartbeat && it.msg.Type != zab.MsgHeartbeatAck {
				m := &it.msg
				s.logf("%d→%d %s epoch=%d zxid=%s index=%d commit=%d seq=%d entries=%d %s", it.from, it.to, m.Type,
					m.Epoch, zab.FormatZxid(m.Zxid), m.Index, m.Commit, m.Seq, len(m.Entries), m.Err)
			}
			n.handle(it)
		}
	default:
		if n := s.nodes[it.to]; n.up && n.inc == it.inc {
			n.handle(it)
		}
	}
	for _, id := range s.ids {
		n := s.nodes[id]
		s.fail(s.chk.member(id, n.disk, n.cutTo))
		n.cutTo = false
	}
	return true
}

func (s *sim) scheduleExternal() {
	if s.live {
		return
	}
	if e, ok := s.src.next(s.now); ok {
		s.ag.push(&item{at: max(e.At, s.now), kind: evExternal, ext: e})
	}
}

func (s *sim) external(e Event) {
	s.stats.Events++
	s.logf("event %s", e)
	switch e.Kind {
	case EvPropose:
		if n := s.nodes[e.Member]; n != nil && n.up {
			for range max(1, e.Arg) {
				n.propose(false)
			}
		}
	case EvRead:
		if n := s.nodes[e.Member]; n != nil && n.up {
			n.read()
		}
	case EvCrash:
		if n := s.nodes[e.Member]; n != nil && n.up {
			s.stats.Faults["crash"]++
			n.crash(e.Arg)
		}
	case EvPowerCut:
		s.stats.Faults["powercut"]++
		for _, id := range e.Group {
			if n := s.nodes[id]; n != nil && n.up {
				s.stats.Faults["crash"]++
				n.crash(e.Arg)
			}
		}
	case EvRestart:
		if n := s.nodes[e.Member]; n != nil && !n.up && n.joined {
			s.stats.Faults["restart"]++
			n.start()
		}
	case EvPartition, EvOneWay:
		s.stats.Faults[e.Kind.String()]++
		s.net.partition(e.Group, s.ids, e.Kind == EvOneWay)
	case EvHeal:
		s.net.heal()
	case EvLossy:
		s.stats.Faults["lossy"]++
		s.net.dropPct = e.Arg
	case EvCalm:
		s.net.dropPct = 0
	case EvReconfig:
		s.reconfig(e)
	case EvTransfer:
		s.transfer(e)
	case EvTrim:
		if n := s.nodes[e.Member]; n != nil && n.up {
			s.stats.Faults["trim"]++
			n.trim(uint64(e.Arg))
		}
	}
}

// send puts a message on the network.
func (s *sim) send(from, to uint64, msg zab.Message) {
	if s.nodes[to] == nil {
		return
	}
	for _, at := range s.net.plan(from, to, msg.Type, s.now) {
		s.ag.push(&item{at: at, kind: evDeliver, from: from, to: to, msg: copyMessage(msg)})
	}
}

// liveness heals everything and requires a leader and a committed
// proposal within LivenessTicks ticks of the slowest clock; then it checks
// the leader's log against everything acknowledged.
func (s *sim) liveness() {
	s.live = true
	s.liveSince = s.now
	s.net.heal()
	s.net.dropPct = 0
	for _, id := range s.ids {
		if n := s.nodes[id]; !n.up && n.joined {
			n.start()
		}
	}
	deadline := s.now + int64(s.opts.LivenessTicks)*s.maxTick
	s.ag.push(&item{at: s.now + s.maxTick, kind: evProbe})
	for {
		for s.err == nil && !s.liveDone {
			if s.now > deadline {
				s.fail(&Violation{Step: s.step, At: s.now, What: fmt.Sprintf(
					"liveness: no leader committed a proposal within %d ticks after every fault healed (%s)", s.opts.LivenessTicks, s.describe())})
				return
			}
			if !s.runOne() {
				s.fail(errors.New("liveness: the agenda ran dry"))
				return
			}
		}
		if s.err != nil {
			return
		}
		if last := s.latestLeader(); last != nil {
			s.fail(s.chk.final(last.id, last.disk))
			s.fail(s.removedMember(last))
			return
		}
		// A proposal committed but no member leads now. A change still
		// pending when the faults ended may remove the leader; the
		// leader then commits it (and any proposal behind it) and steps
		// down, as documented, and the remaining voters elect among
		// themselves. That is no lost liveness: the ensemble must again
		// elect a leader and commit a proposal, within the same deadline.
		s.liveDone = false
	}
}

// removedMember fails a member that reports itself removed while the
// leader's latest committed configuration names it: nothing brings a
// removed member back, so the ensemble would have lost it for good.
//
// That is the leader's active configuration, or its pending one once the
// leader's commit index has reached the pending entry: a leader that
// commits a change in one Ready takes it up at the start of the next (see
// Core.Ready), while a follower that learns the commit from that Ready's
// COMMIT may already have applied it and, removed by it, say so. Checked
// in between, the leader's active configuration still names that member
// (removefollower.trace).
func (s *sim) removedMember(leader *node) error {
	conf, pending := leader.core.Membership()
	if pending != nil && pending.Index <= leader.core.Status().CommittedIndex {
		conf = *pending
	}
	for _, id := range s.ids {
		if n := s.nodes[id]; n.up && n.role == zab.RoleRemoved && conf.IsMember(id) {
			return s.chk.fail(id, "liveness: member reports removed, but the leader's latest committed configuration %s names it", conf.String())
		}
	}
	return nil
}

// latestLeader is the member leading the latest epoch, or nil: one of an
// earlier epoch may not have noticed yet that it lost its quorum.
func (s *sim) latestLeader() *node {
	var last *node
	for _, id := range s.ids {
		if n := s.nodes[id]; n.leading() && (last == nil || n.epoch > last.epoch) {
			last = n
		}
	}
	return last
}

// probe proposes on a random member, once a tick, until one of these
// proposals is applied by its origin.
func (s *sim) probe() {
	up := s.ids[:0:0]
	for _, id := range s.ids {
		if s.nodes[id].up {
			up = append(up, id)
		}
	}
	if len(up) > 0 {
		n := s.nodes[up[s.probeRng.IntN(len(up))]]
		n.propose(true)
	}
	s.ag.push(&item{at: s.now + s.maxTick, kind: evProbe})
}

// describe summarizes the members' state for a failure message.
func (s *sim) describe() string {
	out := ""
	for _, id := range s.ids {
		n := s.nodes[id]
		if out != "" {
			out += "; "
		}
		out += n.describe()
	}
	return out
}
