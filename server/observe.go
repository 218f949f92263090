package server

import (
	"sync/atomic"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zab"
)

// Observer receives the measurements of a running member that operators
// chart (see internal/metrics). Its methods are called from the log
// writer, the protocol loop and the applier, so they must not block.
type Observer interface {
	zab.Observer
	// BackendCommitted is told how long one group's write to the store
	// took.
	BackendCommitted(took time.Duration)
	// Applied is told how long applying one group of entries took in the
	// store, without the wait for the log's flush that a single member
	// overlaps with it.
	Applied(entries int, took time.Duration)
}

// Counters are a member's running totals since it started.
type Counters struct {
	// ProposalsFailed counts proposals that failed for a reason of the
	// cluster (no leader, leadership lost, stopped, timed out), not the
	// deterministic refusals of the core, which are answers.
	ProposalsFailed uint64
	// SlowApplies counts groups whose apply took longer than 100 ms (each
	// logged as etcd's "apply request took too long").
	SlowApplies uint64
	// Writes counts the applied entries that changed the state (each made
	// a revision), by the Origin of their op: every member counts the
	// same entries, whichever member the client wrote through.
	Writes [numOrigins]uint64
}

// numOrigins is how many core.Origin values there are.
const numOrigins = int(core.OriginMember) + 1

type counters struct {
	proposalsFailed atomic.Uint64
	slowApplies     atomic.Uint64
	writes          [numOrigins]atomic.Uint64
}

// Counters returns the member's running totals.
func (m *Member) Counters() Counters {
	c := Counters{
		ProposalsFailed: m.counts.proposalsFailed.Load(),
		SlowApplies:     m.counts.slowApplies.Load(),
	}
	for o := range c.Writes {
		c.Writes[o] = m.counts.writes[o].Load()
	}
	return c
}

// Replication returns the replication layer's own status: log positions,
// role, leadership changes seen.
func (m *Member) Replication() zab.Status { return m.zab.Status() }

// noObserver is the Observer of a member nobody measures.
type noObserver struct{}

func (noObserver) LogSynced(time.Duration)             {}
func (noObserver) PeerRoundTrip(uint64, time.Duration) {}
func (noObserver) ElectionFinished(time.Duration)      {}
func (noObserver) BackendCommitted(time.Duration)      {}
func (noObserver) Applied(int, time.Duration)          {}
