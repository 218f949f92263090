package store

import (
	"sync"

	"github.com/januskv/janus/core"
)

// history guards the oldest readable revision against Badger's compaction.
//
// Badger keeps every version above its discard timestamp and, at or below
// it, only the newest one (dropping the key when that one is a delete). A
// read at a timestamp below the discard timestamp can therefore see a mix of
// states. Two things keep every read of this store at or above it: reads of
// revisions below the floor are refused, and every open reader pins the
// discard timestamp that was wanted when it opened, so a compaction that
// lands while it reads cannot move Badger's discard timestamp past it. The
// raise is made when the last reader pinning an older value goes away.
//
// Nor does it ever pass the durable index (see durable.go): after a crash of
// the machine the store reads at that index again, and Badger must still
// hold every version such a read needs.
type history struct {
	mu sync.Mutex
	// readFloor is the oldest revision At serves; eventFloor the oldest
	// revision Events serves (one above readFloor after a restore, since
	// the restored store lacks the versions a Prev is read from).
	readFloor, eventFloor int64
	// want is the discard timestamp the floors allow; set is what Badger
	// was last given (never above want nor above any pin).
	want, set  uint64
	durable    uint64
	pins       map[uint64]int
	setDiscard func(uint64)
}

func newHistory(setDiscard func(uint64)) *history {
	return &history{pins: map[uint64]int{}, setDiscard: setDiscard}
}

// pin refuses a revision below the floor (events selects which floor) and
// otherwise holds the discard timestamp where it is until unpin.
func (h *history) pin(rev int64, events bool) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	floor := h.readFloor
	if events {
		floor = h.eventFloor
	}
	if rev < floor {
		return 0, core.ErrCompacted
	}
	h.pins[h.want]++
	return h.want, nil
}

func (h *history) unpin(ts uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pins[ts]--; h.pins[ts] <= 0 {
		delete(h.pins, ts)
	}
	h.raiseLocked()
}

// floors returns the current floors.
func (h *history) floors() (readFloor, eventFloor int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.readFloor, h.eventFloor
}

// advance moves the floors and the wanted discard timestamp up (never down)
// and raises Badger's discard timestamp as far as the pins allow.
func (h *history) advance(readFloor, eventFloor int64, want uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readFloor = max(h.readFloor, readFloor)
	h.eventFloor = max(h.eventFloor, eventFloor)
	h.want = max(h.want, want)
	h.raiseLocked()
}

// setDurable raises the durable index the discard timestamp stays at or
// below.
func (h *history) setDurable(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.durable = max(h.durable, index)
	h.raiseLocked()
}

func (h *history) raiseLocked() {
	ts := min(h.want, h.durable)
	for p := range h.pins {
		ts = min(ts, p)
	}
	if ts > h.set {
		h.set = ts
		h.setDiscard(ts)
	}
}
