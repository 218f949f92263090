package linearize

import (
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// never is the return time of an operation whose outcome is unknown: it may
// take effect at any point after its call.
const never = math.MaxInt64

// History collects the operations of many concurrent clients, timestamped
// on one monotonic clock. It is safe for concurrent use.
type History struct {
	start time.Time

	mu  sync.Mutex
	ops []porcupine.Operation
	// revs holds, per client, the revisions its successful responses
	// carried, in the order the client received them.
	revs map[int][]int64
}

// NewHistory returns an empty history whose clock starts now.
func NewHistory() *History {
	return &History{start: time.Now(), revs: map[int][]int64{}}
}

// Now is the history's clock: nanoseconds since the history began. Take it
// just before sending a request (the call) and just after its answer (the
// return).
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records a completed operation. An unknown outcome passes unknown:
// its return time becomes the end of time.
func (h *History) Add(client int, input, output any, call, ret int64, unknown bool) {
	if unknown {
		ret = never
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: input, Output: output, Call: call, Return: ret})
	h.mu.Unlock()
}

// Revision records that client saw rev in a successful response.
func (h *History) Revision(client int, rev int64) {
	h.mu.Lock()
	h.revs[client] = append(h.revs[client], rev)
	h.mu.Unlock()
}

// Operations returns a copy of the recorded operations.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Revisions returns a copy of every client's revision sequence.
func (h *History) Revisions() map[int][]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int][]int64, len(h.revs))
	for c, rs := range h.revs {
		out[c] = append([]int64(nil), rs...)
	}
	return out
}

// Len returns how many operations have been recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}
