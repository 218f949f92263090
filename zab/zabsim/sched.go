package zabsim

import (
	"container/heap"

	"github.com/januskv/janus/zab"
)

// evKind is what a scheduled event does. Events at the same virtual time
// run in the order they were scheduled, so a run is a function of its
// trace alone.
type evKind uint8

const (
	evDeliver  evKind = iota + 1 // a message arrives at to
	evTick                       // a member's clock ticks
	evFsync                      // a member's group write finished its fsync
	evApply                      // a member's applier takes its queue
	evExternal                   // a fault or workload event of the trace
	evProbe                      // the liveness phase proposes again
	evReady                      // a member takes the Ready of the inputs it gathered
)

type item struct {
	at   int64
	seq  uint64
	kind evKind
	// to is the member the event is for, inc its incarnation then: events
	// of an incarnation that crashed are void.
	to, from uint64
	inc      int
	gen      uint64 // evFsync: the group write it completes
	msg      zab.Message
	ext      Event
}

// queue is the scheduler's agenda, ordered by (time, scheduling order).
type queue []*item

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return it
}

type agenda struct {
	q   queue
	seq uint64
}

func (a *agenda) push(it *item) {
	a.seq++
	it.seq = a.seq
	heap.Push(&a.q, it)
}

func (a *agenda) pop() *item {
	if len(a.q) == 0 {
		return nil
	}
	return heap.Pop(&a.q).(*item)
}

func (a *agenda) len() int { return len(a.q) }
