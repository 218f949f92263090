package zabsim

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	seedsFlag = flag.Int("zabsim.seeds", 300, "seeds TestSimulate runs")
	baseFlag  = flag.Uint64("zabsim.base", 0, "first seed TestSimulate runs (0: one from the clock, logged)")
	seedFlag  = flag.Uint64("zabsim.seed", 0, "replay this one seed (0: run -zabsim.seeds seeds)")
	stepsFlag = flag.Int("zabsim.steps", 3000, "steps of the faulty phase of each run")
	traceFlag = flag.String("zabsim.trace", "", "replay the trace in this file (as a failure printed it)")
	keepGoing = flag.Bool("zabsim.keepgoing", false, "run every seed and count the failures, instead of stopping at the first and shrinking it")
	shrinkFlg = flag.Int("zabsim.shrink", 300, "runs the shrinker may make on a failure (0: do not shrink)")
	verbose   = flag.Bool("zabsim.v", false, "log every external event and role change")
	verboseM  = flag.Bool("zabsim.vv", false, "with -zabsim.v, log every message delivered too (heartbeats aside)")
	refusals  = flag.Bool("zabsim.refusals", true, "check that a proposal refused with ErrNoLeader never commits (see Options.IgnoreRefusals)")
	sparesFlg = flag.Int("zabsim.spares", 0, "spare members per run of TestSimulate; with spares, membership changes are among the faults")
	mseeds    = flag.Int("zabsim.mseeds", 100, "seeds TestSimulateMembership runs")
)

// shape is the ensemble a seed runs: 3 or 5 voters, with or without
// observers, so one seed always replays the same ensemble.
func shape(seed uint64) (voters, observers int) {
	switch seed % 4 {
	case 0:
		return 3, 0
	case 1:
		return 3, 1
	case 2:
		return 5, 0
	default:
		return 5, 2
	}
}

// simOptions are the options the flags set, without logging.
func simOptions() Options { return Options{IgnoreRefusals: !*refusals} }

func opts(t testing.TB) Options {
	o := simOptions()
	if *verbose {
		o.Log = func(format string, args ...any) { t.Logf(format, args...) }
		o.LogMessages = *verboseM
	}
	return o
}

// TestSimulate runs seeds of mixed faults through the simulator and fails
// on the first broken invariant, printing the seed, the command that
// replays it, and the trace shrunk to what still fails.
func TestSimulate(t *testing.T) { simulate(t, *seedsFlag, *sparesFlg) }

// TestSimulateMembership is TestSimulate with two spare members per run,
// so that membership changes (add an observer, promote it, remove a
// member or the leader, one at a time) come among the faults, and the
// same invariants hold across them.
func TestSimulateMembership(t *testing.T) {
	if *traceFlag != "" || *seedFlag != 0 {
		t.Skip("TestSimulate replays single seeds and traces (with -zabsim.spares)")
	}
	simulate(t, *mseeds, 2)
}

func simulate(t *testing.T, nseeds, spares int) {
	if *traceFlag != "" {
		res := Replay(readTrace(t, *traceFlag), opts(t))
		logStats(t, res.Stats, 0)
		if res.Err != nil {
			t.Errorf("trace %s: %v", *traceFlag, res.Err)
			report(t, res, simOptions())
		}
		return
	}
	seeds := []uint64{*seedFlag}
	if *seedFlag == 0 {
		base := *baseFlag
		if base == 0 {
			base = uint64(time.Now().UnixNano())
		}
		t.Logf("seeds %d to %d, %d spares (replay all with -zabsim.base=%d -zabsim.seeds=%d -zabsim.spares=%d)",
			base, base+uint64(nseeds)-1, spares, base, nseeds, spares)
		seeds = seeds[:0]
		for i := range nseeds {
			seeds = append(seeds, base+uint64(i))
		}
	}
	total := &Stats{}
	failures := map[string]int{}
	start := time.Now()
	for _, seed := range seeds {
		v, o := shape(seed)
		res := GenerateWithSpares(seed, v, o, spares, *stepsFlag, opts(t))
		total.Add(res.Stats)
		if res.Err != nil && *keepGoing {
			failures[kindOf(res.Err)]++
			t.Errorf("seed %d: %v", seed, res.Err)
			continue
		}
		if res.Err != nil {
			report(t, res, simOptions())
			return
		}
	}
	logStats(t, total, time.Since(start))
	if len(failures) > 0 {
		t.Logf("failures by invariant: %s", formatCounts(failures))
	}
}

func readTrace(t *testing.T, path string) *Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ParseTrace(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tr
}

// report fails the test with everything needed to replay and study the
// failure: the seed, the command, and the shrunk trace.
func report(t *testing.T, res *Result, o Options) {
	t.Helper()
	tr := res.Trace
	t.Errorf("seed %d (%d voters, %d observers, %d spares, %d steps): %v\nreplay: go test ./zab/zabsim -run 'TestSimulate$' -zabsim.seed=%d -zabsim.spares=%d -zabsim.steps=%d -zabsim.v",
		tr.Seed, tr.Voters, tr.Observers, tr.Spares, tr.Steps, res.Err, tr.Seed, tr.Spares, tr.Steps)
	if *shrinkFlg <= 0 {
		return
	}
	min, runs := shrinkFailure(res, o, *shrinkFlg)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("zabsim-%d.trace", tr.Seed))
	if err := os.WriteFile(path, []byte(min.String()), 0o644); err != nil {
		t.Logf("write shrunk trace: %v", err)
	}
	again := Replay(min, o)
	t.Errorf("shrunk in %d runs from %d to %d events (fails with: %v); replay: go test ./zab/zabsim -run 'TestSimulate$' -zabsim.trace=%s -zabsim.v\n%s",
		runs, len(tr.Events), len(min.Events), again.Err, path, min)
}

// shrinkFailure cuts the faulty phase at the failing step, then removes
// events while the run still breaks the same invariant.
func shrinkFailure(res *Result, o Options, budget int) (*Trace, int) {
	tr := cloneTrace(res.Trace)
	what := kindOf(res.Err)
	if v, ok := res.Err.(*Violation); ok && v.Step < tr.Steps && !strings.HasPrefix(v.What, "liveness") {
		cut := cloneTrace(tr)
		cut.Steps = v.Step
		if r := Replay(cut, o); r.Err != nil && kindOf(r.Err) == what {
			tr = cut
		}
	}
	return Shrink(tr, func(c *Trace) bool {
		r := Replay(c, o)
		return r.Err != nil && kindOf(r.Err) == what
	}, budget)
}

// kindOf names the invariant a failure broke: the violation's text up to
// its first number, so that the shrinker keeps the same failure rather
// than any failure.
func kindOf(err error) string {
	v, ok := err.(*Violation)
	if !ok {
		return err.Error()
	}
	if i := strings.IndexAny(v.What, "0123456789"); i > 0 {
		return v.What[:i]
	}
	return v.What
}

func logStats(t testing.TB, s *Stats, took time.Duration) {
	t.Helper()
	checks := 0
	for _, v := range s.Checks {
		checks += v
	}
	t.Logf("%d runs, %d steps, %d external events, %d proposals (%d acknowledged), %d read indexes, %d leaderships, %d membership changes committed, %d invariant checks, %v",
		s.Runs, s.Steps, s.Events, s.Proposals, s.Acked, s.Reads, s.Elections, s.Reconfigs, checks, took.Round(time.Millisecond))
	t.Logf("faults: %s", formatCounts(s.Faults))
	t.Logf("checks: %s", formatCounts(s.Checks))
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// TestSimulateIsDeterministic runs one seed twice and its trace once: all
// three are the same run.
func TestSimulateIsDeterministic(t *testing.T) {
	seed := uint64(7)
	a := Generate(seed, 5, 2, 1500, Options{})
	b := Generate(seed, 5, 2, 1500, Options{})
	c := Replay(a.Trace, Options{})
	for _, r := range []*Result{a, b, c} {
		if r.Err != nil {
			t.Fatalf("seed %d: %v", seed, r.Err)
		}
	}
	if a.Trace.String() != b.Trace.String() {
		t.Fatal("one seed drew two traces")
	}
	sa, sb, sc := fmt.Sprint(*a.Stats), fmt.Sprint(*b.Stats), fmt.Sprint(*c.Stats)
	if sa != sb || sa != sc {
		t.Fatalf("one seed, three runs:\n%s\n%s\n%s", sa, sb, sc)
	}
	if a.Stats.Acked == 0 || a.Stats.Elections == 0 {
		t.Fatalf("the run did nothing: %+v", *a.Stats)
	}
}

var sabotageSeeds = flag.Int("zabsim.sabotage.seeds", 3000, "seeds TestSabotageIsCaught may run per sabotage before it fails")

// TestSabotageIsCaught breaks one rule of the driver's contract at a time
// (the driver's, never the core's) and requires the simulator to catch
// it: at once with the checks of each Ready against the disk, and within
// -zabsim.sabotage.seeds seeds with only the end-to-end invariants (lost
// committed entries, two leaders of an epoch, diverging states). Seeds
// start at 1, so N is the same on every run; it is logged, and the
// end-to-end failure is shrunk to show the trace that still breaks.
func TestSabotageIsCaught(t *testing.T) {
	for _, sab := range []Sabotage{SabotageEarlyDurable, SabotageLateEpochs, SabotageLazySync} {
		for _, endToEnd := range []bool{false, true} {
			name := sab.String() + "/contract"
			if endToEnd {
				name = sab.String() + "/end-to-end"
			}
			t.Run(name, func(t *testing.T) {
				o := simOptions()
				o.Sabotage, o.EndToEndOnly = sab, endToEnd
				start := time.Now()
				for seed := uint64(1); seed <= uint64(*sabotageSeeds); seed++ {
					v, obs := shape(seed)
					res := Generate(seed, v, obs, *stepsFlag, o)
					if res.Err == nil {
						continue
					}
					t.Logf("caught at seed %d (N=%d) in %v: %v", seed, seed, time.Since(start).Round(time.Millisecond), res.Err)
					if endToEnd {
						min, runs := shrinkFailure(res, o, 60)
						t.Logf("shrunk in %d runs from %d to %d events:\n%s", runs, len(res.Trace.Events), len(min.Events), min)
						if r := Replay(min, o); r.Err == nil {
							t.Errorf("the shrunk trace does not fail")
						}
					}
					return
				}
				t.Fatalf("sabotage %s not caught in %d seeds", sab, *sabotageSeeds)
			})
		}
	}
}

// TestTraces replays the traces kept in testdata. Each is a run that
// once failed; knownBug names the core bug one still shows (its failure
// must still be that one, and when the core is fixed the test says so,
// so the entry can become a plain regression run).
func TestTraces(t *testing.T) {
	tests := []struct {
		file     string
		opts     Options
		knownBug string // the failure's kind (kindOf) while the bug lasts
	}{
		// A duplicated REQUEST was proposed once and refused once with
		// ErrNoLeader ("nothing proposed").
		{"requestfail.trace", Options{}, ""},
		// A leader sent SYNC before a quorum acknowledged its epoch; the
		// follower's new currentEpoch then outranked committed entries, and
		// it later led and truncated them.
		{"earlysync.trace", Options{}, ""},
		// A member synchronized by SNAP (its log holding no entry) did not
		// know the last entry's Time; made leader by a transfer, it
		// stamped its entries with its own, slower clock.
		{"snaptime.trace", Options{}, ""},
		// During a leader transfer, a late copy of a REQUEST proposed
		// before it was answered "nothing proposed".
		{"transferdup.trace", Options{}, ""},
		// An observer promoted by a pending change held the change and the
		// best history; two voters that did not hold it voted for it but
		// never told it (it was no voter of theirs), so it never counted a
		// quorum of the old configuration, and they waited for it to lead.
		{"pendingvote.trace", Options{}, ""},
		// Not a core bug: the change removing the leader, pending when the
		// faults ended, committed together with the liveness probe, and the
		// leader stepped down as it should; the check wanted a leader at
		// that very moment instead of a new election within the deadline.
		// In the same run a spare, started while its addition was
		// pending, took the leader's earlier configuration from a
		// notification and reported itself removed for good.
		{"removeleader.trace", Options{}, ""},
		// A candidate held a pending change removing itself; the voters
		// that did not hold it decided for it on the old configuration's
		// quorum, and their FOLLOWING notifications, naming their own
		// history, undid their votes in its count: it never decided.
		{"followvote.trace", Options{}, ""},
		// A spare started while its addition was pending was synchronized
		// before the change reached it: the SYNC's configuration (an
		// earlier one) did not name it, it stopped joining on its starting
		// configuration, and reported itself removed for good.
		{"joinsync.trace", Options{}, ""},
		// Not a core bug: the leader committed the change removing
		// member 1 and sent the COMMIT; member 1 applied it and reported
		// removed before the leader's next Ready took the change up, and
		// the end-of-run check, made in between, read only the leader's
		// active configuration, which still named member 1.
		{"removefollower.trace", Options{}, ""},
		// A leader's disk lagged (a run with one slow fdatasync) while its
		// followers committed its entries; a member that restarted after
		// a power cut synchronized again, and the SYNC, based at the
		// leader's durable index, truncated committed entries from its
		// log (issue 16).
		{"slowleader.trace", Options{}, ""},
		// A spare started while its addition was pending was synchronized
		// by a leader whose disk lagged: the SYNC reached only the
		// leader's durable index, below the entry of its committed
		// configuration, which the member therefore did not adopt. It
		// stopped joining on its starting configuration, and when the
		// leader's configuration (not naming it yet) reached it, reported
		// itself removed for good (issue 16).
		{"joinlagsync.trace", Options{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res := Replay(readTrace(t, filepath.Join("testdata", tt.file)), tt.opts)
			switch {
			case tt.knownBug == "" && res.Err != nil:
				t.Fatalf("replay -zabsim.trace=testdata/%s: %v", tt.file, res.Err)
			case tt.knownBug != "" && res.Err == nil:
				t.Fatalf("known core bug %q no longer shows in testdata/%s: fixed? then expect a clean run", tt.knownBug, tt.file)
			case tt.knownBug != "" && kindOf(res.Err) != tt.knownBug:
				t.Fatalf("testdata/%s fails differently from the known bug %q: %v", tt.file, tt.knownBug, res.Err)
			case res.Err != nil:
				t.Logf("known core bug still shows: %v", res.Err)
			}
		})
	}
}

// TestSabotageMembershipFile runs membership seeds (from 1, so N is the
// same on every run) with a driver that never persists the committed
// configuration, and requires the simulator to notice within
// sabotageSeeds seeds: a restarted member then counts quorums in its
// starting configuration until a notification or a SYNC tells it the
// committed one. (It shows as lost liveness, not as lost data: members
// that still count the old configuration no longer agree on any quorum.)
func TestSabotageMembershipFile(t *testing.T) {
	// It shows in few seeds: 1 to 6 of the first 400, as measured when
	// the first membership change began to wait for announcements and
	// leader transfers joined the faults. The loop stops at the first.
	const sabotageSeeds = 400
	o := simOptions()
	o.Sabotage = SabotageForgetMembership
	for seed := uint64(1); seed <= sabotageSeeds; seed++ {
		v, obs := shape(seed)
		res := GenerateWithSpares(seed, v, obs, 2, *stepsFlag, o)
		if res.Err != nil {
			t.Logf("caught at seed %d (N=%d): %v", seed, seed, res.Err)
			return
		}
	}
	t.Fatalf("a driver that forgets the committed configuration was not caught in %d seeds", sabotageSeeds)
}
