package zabsim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/januskv/janus/zab"
)

// Violation is a broken invariant: what broke, on which member, at which
// virtual time and step.
type Violation struct {
	Step   int
	At     int64
	Member uint64
	What   string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("step %d, t=%d, member %d: %s", v.Step, v.At, v.Member, v.What)
}

// checker holds what the whole run has established and checks every
// member's observable state against it.
type checker struct {
	// committed is the committed log as members applied it: the zxid at
	// each index (0 where no member applied one yet; no entry has zxid 0).
	// A slice, so the checks walk it in index order and a failure reads
	// the same on every replay.
	committed []uint64
	times     []int64 // Entry.Time at each committed index
	// reqAt is where each proposal (origin, reqID) committed.
	reqAt map[[2]uint64]uint64
	// hashes is the applied-state hash after each index.
	hashes map[uint64]uint64
	// leaders is the established leader of each epoch.
	leaders map[uint32]uint64
	// acked are proposals their origin applied (answered to the proposer).
	acked map[[2]uint64]uint64
	// refused are proposals refused with nothing proposed (recorded only
	// when refusals says to check them).
	refused  map[[2]uint64]bool
	refusals bool
	// Per member: the last epochs and durable last zxid seen.
	epochs  map[uint64][2]uint32
	lastZx  map[uint64]uint64
	checks  map[string]int
	current func() (step int, at int64)
}

func newChecker(current func() (int, int64)) *checker {
	return &checker{
		reqAt: map[[2]uint64]uint64{}, hashes: map[uint64]uint64{},
		leaders: map[uint32]uint64{}, acked: map[[2]uint64]uint64{}, refused: map[[2]uint64]bool{},
		epochs: map[uint64][2]uint32{}, lastZx: map[uint64]uint64{}, checks: map[string]int{},
		current: current,
	}
}

func (c *checker) fail(member uint64, format string, args ...any) error {
	step, at := c.current()
	return &Violation{Step: step, At: at, Member: member, What: fmt.Sprintf(format, args...)}
}

// applied checks an entry a member applies, and the state hash after it:
// the committed log and the applied states agree on every member.
func (c *checker) applied(member uint64, e *zab.Entry, hash uint64) error {
	c.checks["committed-prefix"]++
	if z, ok := c.committedAt(e.Index); ok && z != e.Zxid {
		return c.fail(member, "applied index %d zxid %s, but %s committed there", e.Index, zab.FormatZxid(e.Zxid), zab.FormatZxid(z))
	}
	for uint64(len(c.committed)) <= e.Index {
		c.committed = append(c.committed, 0)
		c.times = append(c.times, 0)
	}
	c.committed[e.Index] = e.Zxid
	c.times[e.Index] = e.Time
	c.checks["time-monotonic"]++
	if _, ok := c.committedAt(e.Index - 1); ok && e.Time < c.times[e.Index-1] {
		return c.fail(member, "entry %d has Time %d, below entry %d's %d", e.Index, e.Time, e.Index-1, c.times[e.Index-1])
	}
	if _, ok := c.committedAt(e.Index + 1); ok && e.Time > c.times[e.Index+1] {
		return c.fail(member, "entry %d has Time %d, above entry %d's %d", e.Index, e.Time, e.Index+1, c.times[e.Index+1])
	}
	c.checks["state-hash"]++
	if h, ok := c.hashes[e.Index]; ok && h != hash {
		return c.fail(member, "applied state at index %d hashes %x, another member's %x", e.Index, hash, h)
	}
	c.hashes[e.Index] = hash
	if e.Origin != 0 {
		k := [2]uint64{e.Origin, e.ReqID}
		c.checks["proposal-once"]++
		if at, ok := c.reqAt[k]; ok && at != e.Index {
			return c.fail(member, "proposal %d/%d committed twice, at %d and %d", e.Origin, e.ReqID, at, e.Index)
		}
		c.reqAt[k] = e.Index
		if c.refusals {
			c.checks["refused-not-committed"]++
		}
		if c.refused[k] {
			return c.fail(member, "proposal %d/%d was refused with nothing proposed, yet committed at %d", e.Origin, e.ReqID, e.Index)
		}
	}
	return nil
}

// ack records a proposal its origin answered: its entry applied there.
func (c *checker) ack(origin, reqID, index uint64) { c.acked[[2]uint64{origin, reqID}] = index }

func (c *checker) committedAt(index uint64) (uint64, bool) {
	if index < uint64(len(c.committed)) && c.committed[index] != 0 {
		return c.committed[index], true
	}
	return 0, false
}

// appliedMax is the highest index any member has applied: a read index
// taken after this must be at least it.
func (c *checker) appliedMax() uint64 { return uint64(max(len(c.committed), 1) - 1) }

// readIndex checks the answer to a ReadIndex: it covers every entry any
// member applied before the read was asked.
func (c *checker) readIndex(member, index, floor uint64) error {
	c.checks["read-index"]++
	if index < floor {
		return c.fail(member, "ReadIndex answered %d, but index %d was applied before it was asked", index, floor)
	}
	return nil
}

// restored checks a state a member installed from a snapshot.
func (c *checker) restored(member, index, hash uint64) error {
	c.checks["state-hash"]++
	if h, ok := c.hashes[index]; ok && h != hash {
		return c.fail(member, "restored state at index %d hashes %x, applied states there %x", index, hash, h)
	}
	c.hashes[index] = hash
	return nil
}

// refuse records a proposal refused with nothing proposed.
func (c *checker) refuse(origin, reqID uint64) error {
	k := [2]uint64{origin, reqID}
	c.checks["refused-not-committed"]++
	if at, ok := c.reqAt[k]; ok {
		return c.fail(origin, "proposal %d/%d refused with nothing proposed, yet committed at %d", origin, reqID, at)
	}
	c.refused[k] = true
	return nil
}

// leader checks a member that says it established its leadership of
// epoch: nobody else did in that epoch, and its log holds every entry
// committed so far.
func (c *checker) leader(member uint64, epoch uint32, d *disk) error {
	c.checks["one-leader-per-epoch"]++
	if l, ok := c.leaders[epoch]; ok && l != member {
		return c.fail(member, "leads epoch %d, which member %d already led", epoch, l)
	}
	c.leaders[epoch] = member
	return c.holdsCommitted(member, d, "a new leader")
}

// holdsCommitted checks that d's log holds every committed entry above
// its base (those at or below it are in its state or trimmed).
func (c *checker) holdsCommitted(member uint64, d *disk, who string) error {
	c.checks["committed-kept"]++
	for i := d.base.index + 1; i < uint64(len(c.committed)); i++ {
		z := c.committed[i]
		if z == 0 {
			continue
		}
		got, ok := d.zxidAt(i)
		if !ok {
			return c.fail(member, "%s lacks committed index %d (zxid %s); its log ends at %d", who, i, zab.FormatZxid(z), d.lastIndex())
		}
		if got != z {
			return c.fail(member, "%s holds zxid %s at committed index %d, committed was %s", who, zab.FormatZxid(got), i, zab.FormatZxid(z))
		}
	}
	return nil
}

// cut checks entries a member's log loses (a TRUNC, or a SNAP that
// replaces the log): none of them may be committed.
func (c *checker) cut(member uint64, removed []zab.Entry) error {
	for i := range removed {
		c.checks["trunc-uncommitted"]++
		if z, ok := c.committedAt(removed[i].Index); ok && z == removed[i].Zxid {
			return c.fail(member, "log cut loses committed index %d (zxid %s)", removed[i].Index, zab.FormatZxid(z))
		}
	}
	return nil
}

// member checks what only moves forward on a member's disk: its epochs
// (with currentEpoch never above acceptedEpoch) and the zxid of its last
// durable entry. resetZxid is set after a log cut that cut checked.
func (c *checker) member(id uint64, d *disk, cutTo bool) error {
	c.checks["epochs-monotonic"]++
	prev := c.epochs[id]
	if d.accepted < prev[0] || d.current < prev[1] {
		return c.fail(id, "epochs went back: accepted %d→%d, current %d→%d", prev[0], d.accepted, prev[1], d.current)
	}
	if d.current > d.accepted {
		return c.fail(id, "currentEpoch %d above acceptedEpoch %d", d.current, d.accepted)
	}
	c.epochs[id] = [2]uint32{d.accepted, d.current}
	c.checks["zxid-monotonic"]++
	z := d.durableZxid()
	if z < c.lastZx[id] && !cutTo {
		return c.fail(id, "durable last zxid went back from %s to %s", zab.FormatZxid(c.lastZx[id]), zab.FormatZxid(z))
	}
	c.lastZx[id] = z
	return nil
}

// final checks, once the run is over and a leader is established, that
// every acknowledged proposal is in its log where it committed.
func (c *checker) final(leader uint64, d *disk) error {
	if err := c.holdsCommitted(leader, d, "the final leader"); err != nil {
		return err
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.acked), func(a, b [2]uint64) int { return cmp.Compare(c.acked[a], c.acked[b]) }) {
		i := c.acked[k]
		c.checks["acked-kept"]++
		if i <= d.base.index {
			continue
		}
		e, ok := d.entry(i)
		if !ok || e.Origin != k[0] || e.ReqID != k[1] {
			return c.fail(leader, "acknowledged proposal %d/%d at index %d is not in the final leader's log", k[0], k[1], i)
		}
	}
	return nil
}
