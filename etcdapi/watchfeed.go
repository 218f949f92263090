package etcdapi

import (
	"context"
	"sync"

	"go.etcd.io/etcd/pkg/v3/adt"

	"github.com/januskv/janus/core"
)

// streamQueueLen bounds the revisions a stream may have waiting. A stream
// whose client reads too slowly to keep within it reads the rest from
// history instead, so it never holds up the feed or the other streams.
const streamQueueLen = 1024

func (s *Server) watchQueueLen() int {
	if s.cfg.watchQueueLen > 0 {
		return s.cfg.watchQueueLen
	}
	return streamQueueLen
}

// watchFan owns the face's one subscription to the hub and the index of
// every live watcher of every stream (etcd's synced watcher group). Its
// dispatcher matches each revision against the index and hands it only to
// the streams with a watcher it concerns: a write costs the face one hub
// delivery and one index lookup per event, however many streams and
// watchers there are, plus the work for the watchers it matches.
//
// Lock order: a stream's mu before fan.mu. The dispatcher takes only
// fan.mu, so a stream never holds it up.
type watchFan struct {
	mu   sync.Mutex
	feed *watchFeed // nil until the first watcher, and after a feed ends
	wg   sync.WaitGroup
}

// watchFeed is one subscription of the face. It ends when the member
// stops, the hub is replaced (a snapshot restore) or the face fell behind
// a compaction; its watchers then end and the next create subscribes anew.
type watchFeed struct {
	sub *core.Subscription

	// Guarded by watchFan.mu.
	taken int64      // every revision up to this one is matched and handed out
	index watchIndex // the live watchers of every stream
	err   error      // why the subscription ended
	ended bool
	// moved is closed when taken moves or the feed ends; nil while
	// nobody waits for it.
	moved chan struct{}
}

// fanItem is one revision handed to a stream, with the stream's watchers
// it concerns.
type fanItem struct {
	rv       *revView
	watchers []*watcher
}

// feedLocked returns the face's feed, subscribing from the revision after
// cur if there is none.
func (fan *watchFan) feedLocked(s *Server, cur int64) (*watchFeed, error) {
	if fan.feed != nil {
		return fan.feed, nil
	}
	if err := s.ctx.Err(); err != nil {
		return nil, core.ErrHubClosed
	}
	sub, err := s.b.Watch(cur + 1)
	if err != nil {
		return nil, err
	}
	f := &watchFeed{sub: sub, taken: cur, index: newWatchIndex()}
	fan.feed = f
	fan.wg.Add(1)
	go func() {
		defer fan.wg.Done()
		fan.dispatch(s.ctx, f)
	}()
	return f, nil
}

// wait returns once the feeds' dispatchers have stopped; the server's
// context must have ended.
func (fan *watchFan) wait() { fan.wg.Wait() }

// dispatch matches each revision of f against the index until the
// subscription or the server ends.
func (fan *watchFan) dispatch(ctx context.Context, f *watchFeed) {
	defer f.sub.Close()
	for {
		select {
		case re, ok := <-f.sub.Events():
			if !ok {
				fan.end(f, f.sub.Err())
				return
			}
			fan.publish(f, re)
		case <-ctx.Done():
			fan.end(f, nil)
			return
		}
	}
}

// publish hands re to every stream with a live watcher that one of its
// events concerns. It never blocks: a stream whose queue is full is marked
// to read from history, from re on.
func (fan *watchFan) publish(f *watchFeed, re core.RevEvents) {
	fan.mu.Lock()
	defer fan.mu.Unlock()
	f.taken = re.Rev
	if f.moved != nil {
		close(f.moved)
		f.moved = nil
	}
	if f.index.len() == 0 {
		return
	}
	var streams []*watchStream // each once, its picked watchers gathered
	prevKV := false
	for _, ev := range re.Events {
		if ev.Implicit || ev.Node == nil {
			continue
		}
		f.index.visit(ev.Node.Key, func(w *watcher) {
			if w.mark == re.Rev || re.Rev < w.from {
				return
			}
			w.mark = re.Rev
			if len(w.ws.picked) == 0 {
				streams = append(streams, w.ws)
			}
			w.ws.picked = append(w.ws.picked, w)
			prevKV = prevKV || w.prevKV
		})
	}
	if len(streams) == 0 {
		return
	}
	rv := sharedRevView(re, prevKV)
	for _, ws := range streams {
		ws.handLocked(f, fanItem{rv: rv, watchers: ws.picked})
		ws.picked = nil
	}
}

// end records why f ended and has every stream with a live watcher on it
// end those watchers (err nil: the server is stopping and its streams end
// anyway).
func (fan *watchFan) end(f *watchFeed, err error) {
	fan.mu.Lock()
	defer fan.mu.Unlock()
	f.err, f.ended = err, true
	if fan.feed == f {
		fan.feed = nil
	}
	if f.moved != nil {
		close(f.moved)
		f.moved = nil
	}
	if err == nil {
		return
	}
	streams := map[*watchStream]bool{}
	f.index.each(func(w *watcher) { streams[w.ws] = true })
	for ws := range streams {
		ws.failed = append(ws.failed, f)
		ws.wakeLocked()
	}
}

// waitTaken returns once f has matched every revision up to rev, or
// ended, or ctx ended.
func (fan *watchFan) waitTaken(ctx context.Context, f *watchFeed, rev int64) {
	fan.mu.Lock()
	for f.taken < rev && !f.ended {
		if f.moved == nil {
			f.moved = make(chan struct{})
		}
		moved := f.moved
		fan.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return
		}
		fan.mu.Lock()
	}
	fan.mu.Unlock()
}

// watchIndex finds the live watchers a key concerns: those of one key
// through a map, those of a range, a prefix or every key from one on
// through an interval tree of their ranges (etcd's watcherGroup).
type watchIndex struct {
	keys   map[string]map[*watcher]struct{}
	ranges adt.IntervalTree // each range's value is its map[*watcher]struct{}
	n      int
}

func newWatchIndex() watchIndex {
	return watchIndex{keys: map[string]map[*watcher]struct{}{}, ranges: adt.NewIntervalTree()}
}

func (x *watchIndex) len() int { return x.n }

// interval is w's range for the tree; an every-key-from watcher has no
// end, which the affine comparison takes as past every key.
func (w *watcher) interval() adt.Interval { return adt.NewBytesAffineInterval(w.key, w.end) }

func (x *watchIndex) add(w *watcher) {
	x.n++
	if w.singleKey() {
		set := x.keys[string(w.key)]
		if set == nil {
			set = map[*watcher]struct{}{}
			x.keys[string(w.key)] = set
		}
		set[w] = struct{}{}
		return
	}
	ivl := w.interval()
	if iv := x.ranges.Find(ivl); iv != nil {
		iv.Val.(map[*watcher]struct{})[w] = struct{}{}
		return
	}
	x.ranges.Insert(ivl, map[*watcher]struct{}{w: {}})
}

func (x *watchIndex) remove(w *watcher) {
	if w.singleKey() {
		set := x.keys[string(w.key)]
		if _, ok := set[w]; !ok {
			return
		}
		x.n--
		delete(set, w)
		if len(set) == 0 {
			delete(x.keys, string(w.key))
		}
		return
	}
	ivl := w.interval()
	iv := x.ranges.Find(ivl)
	if iv == nil {
		return
	}
	set := iv.Val.(map[*watcher]struct{})
	if _, ok := set[w]; !ok {
		return
	}
	x.n--
	delete(set, w)
	if len(set) == 0 {
		x.ranges.Delete(ivl)
	}
}

// visit calls fn for every watcher whose key or range holds key.
func (x *watchIndex) visit(key []byte, fn func(*watcher)) {
	for w := range x.keys[string(key)] {
		fn(w)
	}
	if x.ranges.Len() == 0 {
		return
	}
	x.ranges.Visit(adt.NewBytesAffinePoint(key), func(iv *adt.IntervalValue) bool {
		for w := range iv.Val.(map[*watcher]struct{}) {
			fn(w)
		}
		return true
	})
}

// each calls fn for every watcher of the index.
func (x *watchIndex) each(fn func(*watcher)) {
	for _, set := range x.keys {
		for w := range set {
			fn(w)
		}
	}
	x.ranges.Visit(adt.NewBytesAffineInterval([]byte{0}, nil), func(iv *adt.IntervalValue) bool {
		for w := range iv.Val.(map[*watcher]struct{}) {
			fn(w)
		}
		return true
	})
}
