package zabsim

import (
	"math/bits"
	"math/rand/v2"
	"slices"
)

// source hands the scheduler the trace's external events one at a time:
// drawn from the seed as the run goes (generate), or read back from a
// trace (replay). Both schedule each event the moment the previous one
// fires, so a generated run and its replay are the same run.
type source interface {
	// next returns the event to schedule after one fired at now.
	next(now int64) (Event, bool)
}

type replaySource struct{ events []Event }

func (r *replaySource) next(int64) (Event, bool) {
	if len(r.events) == 0 {
		return Event{}, false
	}
	e := r.events[0]
	r.events = r.events[1:]
	return e, true
}

// Mean gap between generated events and the lengths of fault windows, in
// virtual milliseconds (a member ticks about every 100).
const (
	meanGap      = 60
	maxDowntime  = 3000
	maxPartition = 4000
	maxLossy     = 3000
)

// generator draws a mix of faults, proposals and reads. Faults that last (a
// crash, a partition, a lossy network) schedule their own end, so the
// ensemble is not left broken for good; the liveness phase at the end of
// a run ends whatever is left.
type generator struct {
	rng     *rand.Rand
	members []uint64 // every ID, spares included
	voters  []uint64
	spares  []uint64 // IDs outside the starting ensemble; with them, membership changes are drawn
	// pending are the events already decided, earliest first: follow-ups
	// (the ends of faults) and one freshly drawn event.
	pending []Event
	// Each run has its own weather: the mean gap between events, and the
	// share of them that are proposals (the rest are faults). Calm runs
	// commit long histories; stormy ones break them often.
	gap          float64
	proposeShare int
}

func newGenerator(rng *rand.Rand, voters, members, spares []uint64) *generator {
	f := 1 << rng.IntN(4) // 1, 2, 4 or 8
	return &generator{rng: rng, voters: voters, members: members, spares: spares,
		gap: float64(meanGap * f), proposeShare: 45 + 12*bits.Len(uint(f))}
}

func (g *generator) next(now int64) (Event, bool) {
	if !slices.ContainsFunc(g.pending, func(p Event) bool { return !p.Kind.followUp() }) {
		g.add(g.draw(now))
	}
	e := g.pending[0]
	g.pending = g.pending[1:]
	return e, true
}

// add keeps pending in time order (stable for equal times).
func (g *generator) add(e Event) {
	i := len(g.pending)
	for i > 0 && g.pending[i-1].At > e.At {
		i--
	}
	g.pending = slices.Insert(g.pending, i, e)
}

func (g *generator) member() uint64 { return g.members[g.rng.IntN(len(g.members))] }

// group returns a non-empty proper subset of the members.
func (g *generator) group() []uint64 {
	for {
		var out []uint64
		for _, id := range g.members {
			if g.rng.IntN(2) == 0 {
				out = append(out, id)
			}
		}
		if len(out) > 0 && len(out) < len(g.members) {
			return out
		}
	}
}

func (g *generator) draw(now int64) Event {
	at := now + 1 + int64(g.rng.ExpFloat64()*g.gap)
	e := Event{At: at}
	if g.rng.IntN(100) < g.proposeShare {
		if g.rng.IntN(5) == 0 {
			e.Kind, e.Member = EvRead, g.member()
			return e
		}
		e.Kind, e.Member, e.Arg = EvPropose, g.member(), 1+g.rng.IntN(4)
		return e
	}
	// With spares, one fault in six is a membership change (drawn only
	// then, so runs without spares stay what they were).
	if len(g.spares) > 0 && g.rng.IntN(6) == 0 {
		e.Kind, e.Arg = EvReconfig, ReconfigAdd+g.rng.IntN(3)
		if e.Arg == ReconfigAdd {
			e.Member = g.spares[g.rng.IntN(len(g.spares))]
		} else {
			e.Member = g.member()
		}
		return e
	}
	// One fault in eight is a leader transfer; one of those in four names
	// its target as drawn, a voter or not.
	if g.rng.IntN(8) == 0 {
		e.Kind, e.Member = EvTransfer, g.member()
		if g.rng.IntN(4) == 0 {
			e.Arg = 1
		}
		return e
	}
	// The faults, by weight out of 45.
	switch p := g.rng.IntN(45); {
	case p < 10:
		e.Kind, e.Member, e.Arg = EvCrash, g.member(), g.rng.IntN(101)
		g.add(Event{At: at + 1 + g.rng.Int64N(maxDowntime), Kind: EvRestart, Member: e.Member})
	case p < 14:
		e.Kind, e.Group, e.Arg = EvPowerCut, g.group(), g.rng.IntN(101)
		up := at + 1 + g.rng.Int64N(maxDowntime)
		for _, id := range e.Group {
			g.add(Event{At: up, Kind: EvRestart, Member: id})
		}
	case p < 22:
		e.Kind, e.Group = EvPartition, g.group()
		g.add(Event{At: at + 1 + g.rng.Int64N(maxPartition), Kind: EvHeal})
	case p < 27:
		e.Kind, e.Group = EvOneWay, g.group()
		g.add(Event{At: at + 1 + g.rng.Int64N(maxPartition), Kind: EvHeal})
	case p < 37:
		e.Kind, e.Arg = EvLossy, 5+g.rng.IntN(30)
		g.add(Event{At: at + 1 + g.rng.Int64N(maxLossy), Kind: EvCalm})
	default:
		e.Kind, e.Member, e.Arg = EvTrim, g.member(), g.rng.IntN(20)
	}
	return e
}
