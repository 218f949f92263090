package zabsim

import "slices"

// Shrink reduces a failing trace: it removes external events while the
// run still fails, faults first (drops, crashes, partitions: the removal
// that most simplifies the story), then proposals, trying large chunks
// before single events. fails replays a trace and reports whether it still
// fails; Shrink calls it at most budget times and returns the smallest
// failing trace it found and how many runs it made. A removal changes the
// run after that point (the seed draws the same sequence for a different
// schedule), so the result is minimal for this seed, not in general.
func Shrink(t *Trace, fails func(*Trace) bool, budget int) (*Trace, int) {
	best := cloneTrace(t)
	runs := 0
	for _, pass := range []func(Event) bool{
		func(e Event) bool { return e.Kind.fault() },
		func(Event) bool { return true },
	} {
		for chunk := max(1, len(best.Events)/2); ; chunk /= 2 {
			for i := 0; i < len(best.Events) && runs < budget; {
				// The chunk is the next `chunk` events this pass may remove.
				var drop []int
				for j := i; j < len(best.Events) && len(drop) < chunk; j++ {
					if pass(best.Events[j]) {
						drop = append(drop, j)
					}
				}
				if len(drop) == 0 {
					break
				}
				cand := cloneTrace(best)
				cand.Events = cand.Events[:0]
				for j, e := range best.Events {
					if !slices.Contains(drop, j) {
						cand.Events = append(cand.Events, e)
					}
				}
				runs++
				if fails(cand) {
					best = cand // the same i now names the next events
					continue
				}
				i = drop[len(drop)-1] + 1
			}
			if chunk == 1 || runs >= budget {
				break
			}
		}
	}
	return best, runs
}

func cloneTrace(t *Trace) *Trace {
	c := *t
	c.Events = slices.Clone(t.Events)
	return &c
}
