package migrate

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/januskv/janus/zkapi/jute"
)

// FollowStatus is how far a follower is behind its source at one moment.
type FollowStatus struct {
	// Applied counts source events applied to the target so far.
	Applied int64
	// PendingEvents counts source events received and not yet applied.
	PendingEvents int
	// Lag is how long the oldest pending event has waited; zero when
	// nothing is pending.
	Lag time.Duration
	// Resyncs counts how often the source was re-listed after its change
	// stream was lost (disconnection, session expiry, compaction).
	Resyncs int
	// CaughtUp is set once a cut-over has applied everything the source
	// held when it began.
	CaughtUp bool
}

func (s FollowStatus) String() string {
	return fmt.Sprintf("following: applied %d events, lag %d events / %.1fs, %d resyncs", s.Applied, s.PendingEvents, s.Lag.Seconds(), s.Resyncs)
}

// FollowState publishes a running follower's status, for a caller that
// wants to show it elsewhere (a metrics endpoint) than on the progress
// lines. The zero value is ready; it is safe for concurrent use.
type FollowState struct {
	mu sync.Mutex
	st FollowStatus
	// pending reports the live part (pending events and their age).
	pending func() (int, time.Duration)
}

// Status returns the follower's status now.
func (f *FollowState) Status() FollowStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	if f.pending != nil {
		st.PendingEvents, st.Lag = f.pending()
	}
	return st
}

func (f *FollowState) update(fn func(*FollowStatus)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.st)
}

func (f *FollowState) setPending(fn func() (int, time.Duration)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = fn
}

// dirtySet holds the paths a ZooKeeper watch reported changed and not yet
// applied, in the order they were first reported. A path reported again
// before it is applied is kept once: the follower reads a path's current
// state from the source, so one read covers every event before it.
type dirtySet struct {
	mu     sync.Mutex
	now    func() time.Time
	queue  []string
	byPath map[string]*dirtyPath
	// inflight are the paths being applied, still counted as pending.
	inflight []*dirtyPath
	wake     chan struct{}
}

type dirtyPath struct {
	path   string
	since  time.Time // when its first unapplied event arrived
	events int
}

func newDirtySet(now func() time.Time) *dirtySet {
	return &dirtySet{now: now, byPath: map[string]*dirtyPath{}, wake: make(chan struct{}, 1)}
}

// add records one notification. It never blocks.
func (d *dirtySet) add(ev jute.WatcherEvent) {
	d.mu.Lock()
	p, ok := d.byPath[ev.Path]
	if !ok {
		p = &dirtyPath{path: ev.Path, since: d.now()}
		d.byPath[ev.Path] = p
		d.queue = append(d.queue, ev.Path)
	}
	p.events++
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// next takes up to n of the oldest dirty paths; they stay counted as
// pending until done. An event for one of them that arrives meanwhile makes
// it dirty again.
func (d *dirtySet) next(n int) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	n = min(n, len(d.queue))
	paths := slices.Clone(d.queue[:n])
	d.queue = d.queue[n:]
	if len(d.queue) == 0 {
		d.queue = nil // let a long queue's array go
	}
	for _, p := range paths {
		d.inflight = append(d.inflight, d.byPath[p])
		delete(d.byPath, p)
	}
	return paths
}

// done marks the paths next returned as applied and returns how many
// events they covered.
func (d *dirtySet) done() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, p := range d.inflight {
		n += p.events
	}
	d.inflight = d.inflight[:0]
	return n
}

// reset forgets every path: a re-list is about to cover them all.
func (d *dirtySet) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue, d.byPath, d.inflight = nil, map[string]*dirtyPath{}, nil
}

// pending returns the events not yet applied and the age of the oldest.
func (d *dirtySet) pending() (int, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	var oldest time.Time
	for _, p := range d.inflight {
		n += p.events
		if oldest.IsZero() || p.since.Before(oldest) {
			oldest = p.since
		}
	}
	for _, p := range d.byPath {
		n += p.events
		if oldest.IsZero() || p.since.Before(oldest) {
			oldest = p.since
		}
	}
	if n == 0 {
		return 0, 0
	}
	return n, d.now().Sub(oldest)
}

// statusPrinter prints the follow status line every interval while the
// status changes, and on demand.
type statusPrinter struct {
	out   io.Writer
	state *FollowState
	last  FollowStatus
}

func (p *statusPrinter) print(force bool) {
	st := p.state.Status()
	if !force && st.Applied == p.last.Applied && st.PendingEvents == p.last.PendingEvents && st.Resyncs == p.last.Resyncs {
		return
	}
	p.last = st
	fmt.Fprintln(p.out, st)
}
