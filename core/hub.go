package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// RevEvents are the events of one revision, in op order.
type RevEvents struct {
	Rev    int64
	Events []Event
	// Origin is the face whose op made the revision (OriginUnknown for
	// one the store recorded before origins were kept).
	Origin Origin
}

// History replays committed events from durable storage.
type History interface {
	// Events returns the events of every revision in [from, to] that has
	// any, in order, or ErrCompacted if from is below the compact revision.
	Events(from, to int64) ([]RevEvents, error)
}

// ErrHubClosed ends subscriptions when the member stops.
var ErrHubClosed = errors.New("core: watch hub closed")

// ErrHubReplaced ends subscriptions when a snapshot restore replaces the
// member's state: the events between the old state and the snapshot will
// never be published. It is an ErrHubClosed too.
var ErrHubReplaced = fmt.Errorf("%w: state replaced by a snapshot", ErrHubClosed)

// CatchUpChunk bounds how many revisions one history read covers.
const CatchUpChunk = 256

// Hub fans committed events out to subscribers. Publish never blocks: a
// subscriber whose buffer is full is moved back to catching up from history
// at the first revision it has not received, so a slow subscriber neither
// stalls apply nor loses or repeats an event.
type Hub struct {
	history History
	bufSize int

	mu     sync.Mutex
	rev    int64                      // last published revision
	all    map[*Subscription]struct{} // every running subscription
	live   map[*Subscription]struct{} // the ones Publish delivers to
	closed bool
	wg     sync.WaitGroup
}

// NewHub returns a hub whose history ends at revision rev.
func NewHub(history History, rev int64, bufSize int) *Hub {
	if bufSize <= 0 {
		bufSize = 256
	}
	return &Hub{history: history, bufSize: bufSize, rev: rev,
		all: map[*Subscription]struct{}{}, live: map[*Subscription]struct{}{}}
}

// Subscription receives RevEvents in revision order, each exactly once.
type Subscription struct {
	hub  *Hub
	ch   chan RevEvents
	next int64 // first revision not yet sent; guarded by hub.mu while live

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	err    error
}

// Events is closed when the subscription ends; Err then says why.
func (s *Subscription) Events() <-chan RevEvents { return s.ch }

// Err is nil while the subscription runs, and after Close.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Replay reads the events of every revision in [from, to] that has any
// from the history the subscription's hub replays, or ErrCompacted. A
// reader that fans one subscription out uses it to bring a late joiner up
// to the revision the subscription has reached.
func (s *Subscription) Replay(from, to int64) ([]RevEvents, error) {
	return s.hub.history.Events(from, to)
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	s.endLocked(nil)
	s.hub.mu.Unlock()
}

func (s *Subscription) endLocked(err error) {
	s.once.Do(func() {
		s.err = err
		delete(s.hub.live, s)
		delete(s.hub.all, s)
		s.cancel()
		close(s.ch)
	})
}

// Rev is the last published revision.
func (h *Hub) Rev() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev
}

// Subscribe starts a subscription at revision from (0: the next revision).
func (h *Hub) Subscribe(from int64) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrHubClosed
	}
	if from <= 0 {
		from = h.rev + 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Subscription{hub: h, ch: make(chan RevEvents, h.bufSize), next: from, ctx: ctx, cancel: cancel}
	h.all[s] = struct{}{}
	if from > h.rev {
		h.live[s] = struct{}{}
		return s, nil
	}
	h.startCatchUpLocked(s)
	return s, nil
}

func (h *Hub) startCatchUpLocked(s *Subscription) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.catchUp(s)
	}()
}

// catchUp replays history to s until it reaches the published revision,
// then makes it live. It owns s.next until then.
func (h *Hub) catchUp(s *Subscription) {
	for {
		h.mu.Lock()
		if s.ctx.Err() != nil {
			h.mu.Unlock()
			return
		}
		target := h.rev
		if s.next > target {
			h.live[s] = struct{}{}
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		to := min(target, s.next+CatchUpChunk-1)
		batch, err := h.history.Events(s.next, to)
		if err != nil {
			h.mu.Lock()
			s.endLocked(err)
			h.mu.Unlock()
			return
		}
		for _, re := range batch {
			select {
			case s.ch <- re:
			case <-s.ctx.Done():
				return
			}
		}
		s.next = to + 1
	}
}

// Publish hands the events of applied batches, in order, to subscribers.
// Batches that changed nothing still advance nothing: only changed
// revisions carry events.
func (h *Hub) Publish(batches []*Batch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range batches {
		if !b.Changed || b.Rev <= h.rev {
			continue
		}
		h.rev = b.Rev
		re := RevEvents{Rev: b.Rev, Events: b.Events, Origin: b.Origin}
		for s := range h.live {
			if s.next > b.Rev {
				continue
			}
			select {
			case s.ch <- re:
				s.next = b.Rev + 1
			default:
				// Too slow: catch up from history from the first
				// revision it missed.
				delete(h.live, s)
				h.startCatchUpLocked(s)
			}
		}
	}
}

// Close ends every subscription and waits for catch-ups to stop.
func (h *Hub) Close() { h.close(ErrHubClosed) }

// Replaced ends every subscription with ErrHubReplaced, as Close does.
func (h *Hub) Replaced() { h.close(ErrHubReplaced) }

func (h *Hub) close(err error) {
	h.mu.Lock()
	h.closed = true
	subs := make([]*Subscription, 0, len(h.all))
	for s := range h.all {
		subs = append(subs, s)
	}
	for _, s := range subs {
		s.endLocked(err)
	}
	h.mu.Unlock()
	h.wg.Wait()
}
