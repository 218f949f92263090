package linearize

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchEvent is one event a watch delivered.
type WatchEvent struct {
	Rev    int64
	Key    string
	Delete bool
}

func (e WatchEvent) String() string {
	kind := "put"
	if e.Delete {
		kind = "delete"
	}
	return fmt.Sprintf("%s %s@%d", kind, e.Key, e.Rev)
}

// WatchLog records, in delivery order, the events of one etcd watch on a
// prefix. Its goroutine is owned by the log: Stop ends it and waits.
type WatchLog struct {
	Prefix string
	Start  int64

	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	events []WatchEvent
	err    error
}

// StartWatch watches prefix from revision start (which must be at least 1)
// until Stop. clientv3 resumes a broken watch from the revision after the
// last one it delivered, so the application-level stream must stay
// gap-free across server failures; that is what CheckWatch verifies.
func StartWatch(ctx context.Context, w clientv3.Watcher, prefix string, start int64) *WatchLog {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	l := &WatchLog{Prefix: prefix, Start: start, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for first := true; ctx.Err() == nil; first = false {
			if !first {
				// Back off before resuming a watch that ended, so a member
				// without a leader is not asked in a tight loop.
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			from := start
			if last := l.LastRev(); last > 0 {
				from = last + 1
			}
			// A closed channel without a context error is a watch the server
			// cancelled (e.g. no leader); resume where it stopped, as an
			// application would.
			for resp := range w.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from)) {
				if err := resp.Err(); err != nil {
					if resp.CompactRevision != 0 {
						l.fail(fmt.Errorf("watch %s from %d: compacted at %d", prefix, from, resp.CompactRevision))
						return
					}
					continue
				}
				l.mu.Lock()
				for _, ev := range resp.Events {
					l.events = append(l.events, WatchEvent{Rev: ev.Kv.ModRevision, Key: string(ev.Kv.Key), Delete: ev.Type == clientv3.EventTypeDelete})
				}
				l.mu.Unlock()
			}
		}
	}()
	return l
}

func (l *WatchLog) fail(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// Events returns a copy of the events delivered so far.
func (l *WatchLog) Events() []WatchEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]WatchEvent(nil), l.events...)
}

// Stop ends the watch and returns what it delivered and any error that
// ended it early.
func (l *WatchLog) Stop() ([]WatchEvent, error) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]WatchEvent(nil), l.events...), l.err
}

// LastRev returns the revision of the last delivered event, or 0.
func (l *WatchLog) LastRev() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return 0
	}
	return l.events[len(l.events)-1].Rev
}

// CheckWatch checks one watch stream that started at revision start
// against reference, the complete list of events on the watched prefix
// (read after the run, e.g. by a fresh watch from start to the final
// revision): the stream's revisions never go back, no event is delivered
// twice, every delivered event is in the reference, and every reference
// event from start up to the last revision the stream reached was
// delivered (gap-free).
func CheckWatch(got []WatchEvent, start int64, reference []WatchEvent) error {
	ref := map[WatchEvent]bool{}
	for _, e := range reference {
		ref[e] = true
	}
	seen := map[WatchEvent]bool{}
	var last int64
	for i, e := range got {
		if e.Rev < last {
			return fmt.Errorf("event %d (%v) goes back from revision %d", i, e, last)
		}
		if e.Rev < start {
			return fmt.Errorf("event %d (%v) is before the watch's start revision %d", i, e, start)
		}
		if seen[e] {
			return fmt.Errorf("event %d (%v) delivered twice", i, e)
		}
		if !ref[e] {
			return fmt.Errorf("event %d (%v) is not in the reference history", i, e)
		}
		seen[e] = true
		last = e.Rev
	}
	for _, e := range reference {
		if e.Rev >= start && e.Rev <= last && !seen[e] {
			return fmt.Errorf("gap: %v (between start %d and last delivered revision %d) was never delivered", e, start, last)
		}
	}
	return nil
}
