package etcdapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/januskv/janus/core"
)

// invalidWatchID is the ID etcd puts on answers that concern no single
// watcher: refused creates and stream-wide progress notifications.
const invalidWatchID = -1

// Refusals a create request can get, worded as etcd's mvcc package words
// them: clients show the cancel reason as is.
var (
	errEmptyWatcherRange  = errors.New("mvcc: watcher range is empty")
	errWatcherDuplicateID = errors.New("mvcc: duplicate watch ID provided on the WatchStream")
)

type watchServer struct {
	pb.UnimplementedWatchServer
	s *Server
}

func (w *watchServer) Watch(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	ws := &watchStream{
		s:        w.s,
		ctx:      ctx,
		stop:     cancel,
		send:     make(chan outgoing, 128),
		tick:     make(chan struct{}, 1),
		wake:     make(chan struct{}, 1),
		watchers: map[int64]*watcher{},
	}
	ws.cond = sync.NewCond(&ws.mu)
	defer ws.close()
	w.s.watchStats.streams.Add(1)
	defer w.s.watchStats.streams.Add(-1)
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		ws.run()
	}()

	// The receiving goroutine ends when Recv fails, which gRPC
	// guarantees once this handler has returned.
	recvErr := make(chan error, 1)
	go func() { recvErr <- ws.recvLoop(stream) }()

	tick := time.NewTicker(w.s.cfg.ProgressNotifyInterval)
	defer tick.Stop()
	for {
		select {
		case out := <-ws.send:
			if err := ws.sendResponse(stream, out); err != nil {
				return err
			}
		case <-tick.C:
			ws.tickProgress()
		case err := <-recvErr:
			return err
		case <-ctx.Done():
			return grpcError(context.Cause(ctx))
		case <-w.s.ctx.Done():
			return rpctypes.ErrGRPCStopped
		}
	}
}

// watchStream is one Watch call: its watchers share one ordered send queue.
// The face's feed hands the stream the revisions its live watchers care
// about; the stream's own goroutine (run) turns them into responses, so a
// stream whose client reads slowly holds up only itself.
type watchStream struct {
	s    *Server
	ctx  context.Context
	stop context.CancelFunc
	send chan outgoing
	tick chan struct{}  // progress interval elapsed; read by run
	wake chan struct{}  // the feed handed the stream work; read by run
	wg   sync.WaitGroup // run, catch-up and progress goroutines

	// deliverMu is held while run queues one revision's events, so a
	// cancel can wait out a delivery already under way.
	deliverMu sync.Mutex

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a watcher's sent revision moves
	watchers map[int64]*watcher
	nextID   int64
	closed   bool

	// Guarded by s.watchFan.mu: what the feed handed the stream.
	handed []fanItem // revisions to deliver, oldest first
	// behind is the first revision the stream must read from history
	// (0: none): its queue was full when the feed handed it one, so it
	// gets nothing more from the feed until it has caught up with
	// behindFeed.
	behind     int64
	behindFeed *watchFeed
	// pending is the first revision handed to the stream and not yet
	// delivered (0: none): the live watchers have every event before it.
	pending int64
	failed  []*watchFeed // ended feeds whose live watchers must end
	picked  []*watcher   // the feed's scratch list while it matches one revision
}

func (ws *watchStream) close() {
	ws.mu.Lock()
	ws.closed = true
	for _, w := range ws.watchers {
		w.cancel()
	}
	ws.cond.Broadcast()
	ws.mu.Unlock()
	ws.stop()
	ws.wg.Wait()
	ws.mu.Lock()
	for _, w := range ws.watchers {
		ws.removeLocked(w)
	}
	ws.mu.Unlock()
}

// outgoing is a response waiting to be sent; fragment says whether it may
// be split.
type outgoing struct {
	resp     *pb.WatchResponse
	fragment bool
}

// queue hands a response to the sending loop, unless the stream ended.
func (ws *watchStream) queue(ctx context.Context, resp *pb.WatchResponse) bool {
	return ws.queueOut(ctx, outgoing{resp: resp})
}

func (ws *watchStream) queueOut(ctx context.Context, out outgoing) bool {
	select {
	case ws.send <- out:
		return true
	case <-ctx.Done():
		return false
	}
}

func (ws *watchStream) sendResponse(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse], out outgoing) error {
	resp := out.resp
	if !out.fragment || len(resp.Events) < 2 || proto.Size(resp) < ws.s.cfg.MaxRequestBytes {
		return stream.Send(resp)
	}
	// Split into responses under the request limit, each with at least
	// one event; all but the last are marked as fragments.
	events := resp.Events
	for len(events) > 0 {
		cur := &pb.WatchResponse{
			Header: resp.Header, WatchId: resp.WatchId, Created: resp.Created, Canceled: resp.Canceled,
			CompactRevision: resp.CompactRevision, CancelReason: resp.CancelReason, Fragment: true,
		}
		n := 0
		for _, ev := range events {
			cur.Events = append(cur.Events, ev)
			if len(cur.Events) > 1 && proto.Size(cur) >= ws.s.cfg.MaxRequestBytes {
				cur.Events = cur.Events[:len(cur.Events)-1]
				break
			}
			n++
		}
		events = events[n:]
		cur.Fragment = len(events) > 0
		if err := stream.Send(cur); err != nil {
			return err
		}
	}
	return nil
}

func (ws *watchStream) recvLoop(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			// The client closed its side; keep sending until the
			// stream's context ends.
			<-ws.ctx.Done()
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case req.GetCreateRequest() != nil:
			ws.create(req.GetCreateRequest())
		case req.GetCancelRequest() != nil:
			ws.cancelWatch(req.GetCancelRequest().WatchId)
		case req.GetProgressRequest() != nil:
			ws.requestProgress()
		}
	}
}

func (ws *watchStream) header(rev int64) *pb.ResponseHeader { return ws.s.header(rev) }

func (ws *watchStream) create(r *pb.WatchCreateRequest) {
	key, end := r.Key, r.RangeEnd
	if len(key) == 0 {
		key = []byte{0} // the smallest key
	}
	fromKey := len(end) == 1 && end[0] == 0
	if fromKey {
		end = nil
	}
	cur := ws.s.currentRev()
	refuse := func(reason string) {
		ws.queue(ws.ctx, &pb.WatchResponse{
			Header: ws.header(cur), WatchId: invalidWatchID, Created: true, Canceled: true, CancelReason: reason,
		})
	}
	if r.StartRevision < 0 {
		refuse("mvcc: required revision has been compacted")
		return
	}
	// etcd checks the permission before the range.
	c, err := ws.s.caller(ws.ctx)
	if err == nil {
		err = c.may(key, r.RangeEnd, core.AuthRead)
	}
	if err != nil {
		refuse(err.Error())
		return
	}
	if !fromKey && len(end) != 0 && bytes.Compare(key, end) >= 0 {
		refuse(errEmptyWatcherRange.Error())
		return
	}

	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return
	}
	id := r.WatchId
	if id == 0 {
		for ws.watchers[ws.nextID] != nil {
			ws.nextID++
		}
		id = ws.nextID
		ws.nextID++
	} else if ws.watchers[id] != nil {
		ws.mu.Unlock()
		refuse(errWatcherDuplicateID.Error())
		return
	}
	start := r.StartRevision
	if start == 0 {
		start = cur + 1
	}
	ctx, cancel := context.WithCancel(ws.ctx)
	w := &watcher{
		ws: ws, id: id, key: key, end: end, fromKey: fromKey,
		prevKV: r.PrevKv, fragment: r.Fragment, progressNotify: r.ProgressNotify,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		from: start, sent: start - 1,
	}
	if c.st.Enabled && !c.isRoot() {
		w.user, w.authRev, w.permEnd, w.zkAuth = c.user, c.st.Rev, r.RangeEnd, c.zkAuth()
	}
	for _, f := range r.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			w.noPut = true
		case pb.WatchCreateRequest_NODELETE:
			w.noDelete = true
		}
	}
	if w.prevKV && start <= cur {
		// etcd reads an event's prev_kv at the revision before it, which
		// is gone for an event at the compaction point: it sends that
		// event without one (and Kubernetes then reports the watch as
		// expired). Events replayed from before the current revision are
		// the only ones that can be there.
		w.compactRev = ws.s.b.Status().CompactRev
	}
	ws.watchers[id] = w
	ws.s.watchStats.watchers.Add(1)
	ws.mu.Unlock()
	// The created answer is queued before the watcher can send anything.
	// Creates and cancels all come from the receiving goroutine, so a
	// cancel cannot overtake it either.
	ws.queue(ws.ctx, &pb.WatchResponse{Header: ws.header(cur), WatchId: id, Created: true})
	ws.start(w, cur)
}

// start makes w live on the face's feed if the feed has not passed the
// revision before w's start, or else replays history to it first (etcd's
// unsynced watcher group).
func (ws *watchStream) start(w *watcher, cur int64) {
	fan := &ws.s.watchFan
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		close(w.done)
		return
	}
	fan.mu.Lock()
	f, err := fan.feedLocked(ws.s, cur)
	if err != nil {
		fan.mu.Unlock()
		ws.mu.Unlock()
		close(w.done)
		w.fail(err)
		return
	}
	w.feed = f
	if w.sent >= f.taken {
		ws.joinLocked(w)
		fan.mu.Unlock()
		ws.mu.Unlock()
		close(w.done)
		return
	}
	fan.mu.Unlock()
	ws.wg.Add(1)
	ws.mu.Unlock()
	go func() {
		defer ws.wg.Done()
		defer close(w.done)
		ws.catchUp(w)
	}()
}

// joinLocked puts w in its feed's index; ws.mu and the fan's mu are held.
func (ws *watchStream) joinLocked(w *watcher) {
	w.live = true
	w.feed.index.add(w)
}

// run delivers what the feed hands the stream and sends the periodic
// progress notifications, until the stream ends.
func (ws *watchStream) run() {
	for {
		select {
		case <-ws.wake:
			ws.drain()
		case <-ws.tick:
			ws.sendProgress()
		case <-ws.ctx.Done():
			return
		}
	}
}

// handLocked gives the stream one revision for some of its live watchers;
// the fan's mu is held. It never blocks: with the queue full, the stream
// reads that revision and the ones after it from history.
func (ws *watchStream) handLocked(f *watchFeed, it fanItem) {
	rev := it.rv.re.Rev
	switch {
	case ws.behind != 0:
		// Catching up from history already covers it.
	case len(ws.handed) >= ws.s.watchQueueLen():
		ws.behind, ws.behindFeed = rev, f
		ws.s.watchStats.fellBehind.Add(1)
		if ws.pending == 0 {
			ws.pending = rev
		}
	default:
		ws.handed = append(ws.handed, it)
		if ws.pending == 0 {
			ws.pending = rev
		}
	}
	ws.wakeLocked()
}

func (ws *watchStream) wakeLocked() {
	select {
	case ws.wake <- struct{}{}:
	default:
	}
}

// settledLocked moves pending past what the stream has delivered; the
// fan's mu is held.
func (ws *watchStream) settledLocked() {
	switch {
	case len(ws.handed) > 0:
		ws.pending = ws.handed[0].rv.re.Rev
	case ws.behind != 0:
		ws.pending = ws.behind
	default:
		ws.pending = 0
	}
}

// settled records that the stream delivered what it was handed up to
// now, and wakes progress requests waiting for that.
func (ws *watchStream) settled() {
	ws.mu.Lock()
	ws.s.watchFan.mu.Lock()
	ws.settledLocked()
	ws.s.watchFan.mu.Unlock()
	ws.cond.Broadcast()
	ws.mu.Unlock()
}

// drain delivers the revisions in the stream's queue, ends the watchers of
// feeds that ended, and reads from history what the queue had no room
// for, until nothing is left.
func (ws *watchStream) drain() {
	fan := &ws.s.watchFan
	for ws.ctx.Err() == nil {
		fan.mu.Lock()
		switch {
		case len(ws.handed) > 0:
			items := ws.handed
			ws.handed = nil
			fan.mu.Unlock()
			ws.deliverItems(items)
			ws.settled()
		case len(ws.failed) > 0:
			f := ws.failed[0]
			ws.failed = ws.failed[1:]
			if ws.behindFeed == f {
				ws.behind, ws.behindFeed = 0, nil
				ws.settledLocked()
			}
			fan.mu.Unlock()
			ws.failLive(f, f.err)
		case ws.behind != 0:
			f, from := ws.behindFeed, ws.behind
			to := min(f.taken, from+core.CatchUpChunk-1)
			fan.mu.Unlock()
			if err := ws.replay(f, from, to); err != nil {
				fan.mu.Lock()
				if ws.behindFeed == f {
					ws.behind, ws.behindFeed = 0, nil
				}
				fan.mu.Unlock()
				ws.failLive(f, err)
				ws.settled()
				continue
			}
			fan.mu.Lock()
			if ws.behindFeed == f && ws.behind == from {
				ws.behind = to + 1
				if ws.behind > f.taken {
					// Caught up: the feed hands it the next revision.
					ws.behind, ws.behindFeed = 0, nil
				}
			}
			fan.mu.Unlock()
			ws.settled()
		default:
			fan.mu.Unlock()
			return
		}
	}
}

// deliverItems queues the events of handed revisions to the watchers they
// concern that are still live: one response per watcher for all of them.
func (ws *watchStream) deliverItems(items []fanItem) {
	ws.deliverMu.Lock()
	defer ws.deliverMu.Unlock()
	if len(items) == 1 {
		it := items[0]
		rev := it.rv.re.Rev
		targets := it.watchers[:0]
		ws.mu.Lock()
		for _, w := range it.watchers {
			if w.live && w.sent < rev {
				targets = append(targets, w)
			}
		}
		ws.mu.Unlock()
		for _, w := range targets {
			w.deliver(it.rv)
		}
		return
	}
	var order []*watcher
	revs := map[*watcher][]*revView{}
	ws.mu.Lock()
	for _, it := range items {
		for _, w := range it.watchers {
			if !w.live || w.sent >= it.rv.re.Rev {
				continue
			}
			if revs[w] == nil {
				order = append(order, w)
			}
			revs[w] = append(revs[w], it.rv)
		}
	}
	ws.mu.Unlock()
	for _, w := range order {
		w.deliver(revs[w]...)
	}
}

// replay reads revisions [from, to] from history and delivers them to the
// stream's live watchers on f they concern, one response per watcher.
func (ws *watchStream) replay(f *watchFeed, from, to int64) error {
	batch, err := f.sub.Replay(from, to)
	if err != nil {
		return err
	}
	items := make([]fanItem, 0, len(batch))
	ws.mu.Lock()
	for _, re := range batch {
		it := fanItem{rv: &revView{re: re}}
		for _, w := range ws.watchers {
			if w.live && w.feed == f && re.Rev >= w.from && w.concerned(re) {
				it.watchers = append(it.watchers, w)
			}
		}
		if len(it.watchers) > 0 {
			items = append(items, it)
		}
	}
	ws.mu.Unlock()
	if len(items) > 0 {
		ws.deliverItems(items)
	}
	return nil
}

// failLive ends the stream's live watchers on f.
func (ws *watchStream) failLive(f *watchFeed, err error) {
	var live []*watcher
	ws.mu.Lock()
	for _, w := range ws.watchers {
		if w.feed == f && w.live {
			live = append(live, w)
		}
	}
	ws.mu.Unlock()
	for _, w := range live {
		w.fail(err)
	}
}

// catchUp replays history to w until it has every revision the feed has
// taken, then makes it live. Until then it is w's only sender.
func (ws *watchStream) catchUp(w *watcher) {
	f := w.feed
	fan := &ws.s.watchFan
	for {
		ws.mu.Lock()
		fan.mu.Lock()
		taken, ended, ferr := f.taken, f.ended, f.err
		switch {
		case w.ctx.Err() != nil || w.ended:
			fan.mu.Unlock()
			ws.mu.Unlock()
			return
		case ended:
			fan.mu.Unlock()
			ws.mu.Unlock()
			if ferr == nil {
				ferr = core.ErrHubClosed
			}
			w.fail(ferr)
			return
		case w.sent >= taken:
			ws.joinLocked(w)
			fan.mu.Unlock()
			ws.mu.Unlock()
			return
		}
		fan.mu.Unlock()
		from, to := w.sent+1, min(taken, w.sent+core.CatchUpChunk)
		ws.mu.Unlock()
		batch, err := f.sub.Replay(from, to)
		if err != nil {
			w.fail(err)
			return
		}
		for _, re := range batch {
			if !w.deliver(&revView{re: re}) {
				return
			}
		}
		ws.mu.Lock()
		w.sent = max(w.sent, to)
		ws.cond.Broadcast()
		ws.mu.Unlock()
	}
}

// removeLocked forgets w: it gets nothing more from the feed and no
// longer holds back progress notifications.
func (ws *watchStream) removeLocked(w *watcher) {
	if ws.watchers[w.id] == w {
		delete(ws.watchers, w.id)
	}
	if w.live {
		w.live = false
		ws.s.watchFan.mu.Lock()
		w.feed.index.remove(w)
		ws.s.watchFan.mu.Unlock()
	}
	if !w.ended {
		w.ended = true
		ws.s.watchStats.watchers.Add(-1)
		ws.cond.Broadcast()
	}
}

func (ws *watchStream) cancelWatch(id int64) {
	ws.mu.Lock()
	w := ws.watchers[id]
	ws.mu.Unlock()
	if w == nil {
		return // etcd ignores cancels of unknown watchers
	}
	w.cancel()
	<-w.done
	ws.mu.Lock()
	ws.removeLocked(w)
	ws.mu.Unlock()
	// Wait out a delivery the stream's goroutine may have begun before the
	// removal, so the canceled answer comes after the watcher's last event.
	ws.deliverMu.Lock()
	ws.deliverMu.Unlock()
	ws.queue(ws.ctx, &pb.WatchResponse{Header: ws.header(ws.s.currentRev()), WatchId: id, Canceled: true})
}

// requestProgress answers a RequestProgress: once every watcher of the
// stream has sent everything up to the current revision, one notification
// with watch ID -1 tells the client (which hands it to all of them) that
// nothing up to that revision is missing. A stream with no watchers gets
// none, as from etcd.
func (ws *watchStream) requestProgress() {
	rev := ws.s.currentRev()
	ws.mu.Lock()
	if len(ws.watchers) == 0 || ws.closed {
		ws.mu.Unlock()
		return
	}
	ws.wg.Add(1)
	ws.mu.Unlock()
	go func() {
		defer ws.wg.Done()
		// Until the feed has taken rev, a live watcher's progress moves
		// without the stream hearing of it; from then on only the
		// stream's own deliveries move it, and they signal cond.
		fan := &ws.s.watchFan
		fan.mu.Lock()
		f := fan.feed
		fan.mu.Unlock()
		if f != nil {
			fan.waitTaken(ws.ctx, f, rev)
		}
		ws.mu.Lock()
		for !ws.closed && !ws.allSentLocked(rev) {
			ws.cond.Wait()
		}
		closed := ws.closed
		ws.mu.Unlock()
		if !closed {
			ws.queue(ws.ctx, &pb.WatchResponse{Header: ws.header(rev), WatchId: invalidWatchID})
		}
	}()
}

func (ws *watchStream) allSentLocked(rev int64) bool {
	ws.s.watchFan.mu.Lock()
	defer ws.s.watchFan.mu.Unlock()
	for _, w := range ws.watchers {
		if w.sentLocked() < rev && !w.ended {
			return false
		}
	}
	return true
}

// tickProgress tells the stream's goroutine the progress interval has
// elapsed.
func (ws *watchStream) tickProgress() {
	select {
	case ws.tick <- struct{}{}:
	default:
	}
}

// sendProgress sends a progress notification to every live watcher that
// asked for them and got no events since the last one. As in etcd, a
// watcher still replaying history gets none.
func (ws *watchStream) sendProgress() {
	type note struct {
		w   *watcher
		rev int64
	}
	var notes []note
	ws.mu.Lock()
	ws.s.watchFan.mu.Lock()
	for _, w := range ws.watchers {
		if !w.progressNotify || !w.live || w.ended {
			continue
		}
		if w.sentEvents {
			w.sentEvents = false
			continue
		}
		notes = append(notes, note{w, w.sentLocked()})
	}
	ws.s.watchFan.mu.Unlock()
	ws.mu.Unlock()
	for _, n := range notes {
		ws.queue(n.w.ctx, &pb.WatchResponse{Header: ws.header(n.rev), WatchId: n.w.id})
	}
}

// watcher is one watch of a stream. It has a goroutine only while it
// replays history; live, the stream's goroutine delivers to it what the
// face's feed hands the stream.
type watcher struct {
	ws               *watchStream
	id               int64
	key, end         []byte
	fromKey          bool
	from             int64 // the first revision it reports
	prevKV, fragment bool
	noPut, noDelete  bool
	progressNotify   bool
	// compactRev is the compaction point when a prev_kv watcher started
	// below the current revision: events at or below it go without
	// prev_kv, as etcd's do (0 otherwise).
	compactRev int64
	ctx        context.Context
	cancel     context.CancelFunc
	// done is closed once the watcher's catch-up, if any, has ended.
	done chan struct{}
	// sentEvents says events went out since the last progress tick; only
	// the watcher's one sender (catch-up, then the stream's goroutine)
	// touches it.
	sentEvents bool

	// A watcher of a user that is not root (auth on) is checked again
	// whenever the auth store changes, and ends with "permission denied"
	// once its range is no longer the user's to read: a revoked
	// permission never delivers another event (etcd checks only at
	// creation). It also ends when an event touches a znode whose ACL
	// denies the user's ZooKeeper identity READ. authRev 0: no checks.
	user    string
	authRev uint64
	permEnd []byte
	zkAuth  []core.ID

	// Guarded by ws.mu.
	sent  int64      // every event up to this revision is queued
	feed  *watchFeed // set when the watcher starts
	live  bool       // in the feed's index (changed with the fan's mu held too)
	ended bool

	mark int64 // the revision the feed last chose it for; guarded by the fan's mu
}

// sentLocked is the revision up to which the watcher has every event
// queued: a live watcher has everything the feed has taken, but for what
// its stream still has to deliver. ws.mu and the fan's mu are held.
func (w *watcher) sentLocked() int64 {
	if !w.live {
		return w.sent
	}
	done := w.feed.taken
	if w.ws.pending != 0 {
		done = w.ws.pending - 1
	}
	return max(w.sent, done)
}

func (w *watcher) singleKey() bool { return !w.fromKey && len(w.end) == 0 }

// concerned says whether an event of re is on one of w's keys.
func (w *watcher) concerned(re core.RevEvents) bool {
	for _, ev := range re.Events {
		if !ev.Implicit && ev.Node != nil && w.matches(ev.Node.Key) {
			return true
		}
	}
	return false
}

func (w *watcher) matches(key []byte) bool {
	if bytes.Compare(key, w.key) < 0 {
		return false
	}
	switch {
	case w.fromKey:
		return true
	case len(w.end) == 0:
		return bytes.Equal(key, w.key)
	}
	return bytes.Compare(key, w.end) < 0
}

// stillPermitted re-checks the watcher's user against the auth store when
// it has changed since the last check.
func (w *watcher) stillPermitted() bool {
	if w.authRev == 0 {
		return true
	}
	st := w.ws.s.b.Auth()
	switch {
	case st.Rev == w.authRev:
		return true
	case !st.Enabled:
		w.authRev, w.zkAuth = 0, nil
		return true
	case !st.Permitted(w.user, w.key, w.permEnd, core.AuthRead):
		return false
	}
	w.authRev = st.Rev
	return true
}

// revView is one revision as its watchers share it: each event's key-value
// and each key's prev_kv converted once, however many watchers get them.
// Built with sharedRevView, it is filled in and any number of streams read
// it; otherwise it converts on demand and one goroutine uses it.
type revView struct {
	re      core.RevEvents
	kvs     []*mvccpb.KeyValue
	prevKVs map[string]*mvccpb.KeyValue
}

// sharedRevView converts every event of re up front (and the prev_kvs, if
// a watcher wants them), for the streams of the watchers it concerns to
// read at once.
func sharedRevView(re core.RevEvents, prevKV bool) *revView {
	rv := &revView{re: re}
	for i, ev := range re.Events {
		if !ev.Implicit && ev.Node != nil {
			rv.kv(i)
		}
	}
	if prevKV {
		rv.prevKV(nil)
	}
	return rv
}

// kv is the key-value of event i: a delete carries only key and revision.
func (rv *revView) kv(i int) *mvccpb.KeyValue {
	if rv.kvs == nil {
		rv.kvs = make([]*mvccpb.KeyValue, len(rv.re.Events))
	}
	if rv.kvs[i] == nil {
		ev := rv.re.Events[i]
		if ev.Type == core.EventDelete {
			rv.kvs[i] = &mvccpb.KeyValue{Key: ev.Node.Key, ModRevision: ev.Node.ModRev}
		} else {
			rv.kvs[i] = keyValue(ev.Node)
		}
	}
	return rv.kvs[i]
}

// prevKV is key's state before the revision, or nil. etcd reads prev_kv
// at the revision before the event's, so a key written twice in one Txn
// gets the state from before the Txn both times, not the Txn's
// intermediate write.
func (rv *revView) prevKV(key []byte) *mvccpb.KeyValue {
	if rv.prevKVs == nil {
		rv.prevKVs = map[string]*mvccpb.KeyValue{}
		for _, ev := range rv.re.Events {
			if ev.Node == nil || ev.Implicit {
				continue
			}
			k := string(ev.Node.Key)
			if _, seen := rv.prevKVs[k]; seen {
				continue
			}
			var kv *mvccpb.KeyValue
			if ev.Prev != nil && !ev.Prev.Implicit {
				kv = keyValue(ev.Prev)
			}
			rv.prevKVs[k] = kv
		}
	}
	return rv.prevKVs[string(key)]
}

// deliver queues the watcher's share of the events of one or more
// revisions, in order, as one response (a stream that had several
// revisions waiting sends each watcher one response for all of them, as
// etcd sends a backlog). It returns false once the watcher has ended.
func (w *watcher) deliver(rvs ...*revView) bool {
	if !w.stillPermitted() {
		w.fail(errPermissionDenied)
		return false
	}
	var events []*mvccpb.Event
	var upTo int64 // the last revision whose events are all in events
	var fromZooKeeper int
	denied := false
revisions:
	for _, rv := range rvs {
		re := rv.re
		cut := len(events)
		for i, ev := range re.Events {
			if ev.Implicit || ev.Node == nil || !w.matches(ev.Node.Key) {
				continue
			}
			if w.zkAuth != nil && !core.CheckACL(ev.Node.ACL, core.PermRead, w.zkAuth) {
				// Nothing of this revision goes out; the earlier
				// ones do, then the cancel.
				events, denied = events[:cut], true
				break revisions
			}
			e := &mvccpb.Event{Type: mvccpb.PUT}
			if ev.Type == core.EventDelete {
				if w.noDelete {
					continue
				}
				e.Type = mvccpb.DELETE
			} else if w.noPut {
				continue
			}
			e.Kv = rv.kv(i)
			create := e.Type == mvccpb.PUT && e.Kv.CreateRevision == e.Kv.ModRevision
			if w.prevKV && !create && re.Rev > w.compactRev {
				e.PrevKv = rv.prevKV(ev.Node.Key)
			}
			events = append(events, e)
		}
		if re.Origin == core.OriginZooKeeper {
			fromZooKeeper += len(events) - cut
		}
		upTo = re.Rev
	}
	if len(events) > 0 {
		resp := &pb.WatchResponse{Header: w.ws.header(upTo), WatchId: w.id, Events: events}
		if !w.ws.queueOut(w.ctx, outgoing{resp: resp, fragment: w.fragment}) {
			return false
		}
		w.ws.s.watchStats.events.Add(uint64(len(events)))
		w.ws.s.watchStats.fromZooKeeper.Add(uint64(fromZooKeeper))
		w.sentEvents = true
	}
	if denied {
		w.fail(errPermissionDenied)
		return false
	}
	w.ws.mu.Lock()
	w.sent = max(w.sent, upTo)
	w.ws.cond.Broadcast()
	w.ws.mu.Unlock()
	return true
}

// errPermissionDenied ends a watcher whose user lost the right to read.
var errPermissionDenied = &core.Error{Code: core.CodeAuthPermissionDenied}

// fail ends the watcher: a compacted start revision is reported as etcd
// reports it (compact_revision set, canceled, header revision 0), anything
// else as a cancel with a reason. A watcher whose feed ended because a
// snapshot replaced the member's state is reported as compacted too: the
// events up to the snapshot are not in the new state's history, whose
// compact revision is the first it holds, and etcd's clients answer that
// by listing again (an etcd member keeps the leader's history in a
// snapshot and its watchers run on; see the README's limits).
func (w *watcher) fail(err error) {
	resp := &pb.WatchResponse{Header: w.ws.header(0), WatchId: w.id, Canceled: true}
	if errors.Is(err, core.ErrCompacted) || errors.Is(err, core.ErrHubReplaced) {
		resp.CompactRevision = w.ws.s.b.Status().CompactRev
	} else {
		resp.Header.Revision = w.ws.s.currentRev()
		resp.CancelReason = grpcError(err).Error()
	}
	w.ws.queue(w.ctx, resp)
	w.ws.mu.Lock()
	w.ws.removeLocked(w)
	w.ws.mu.Unlock()
}

// watchStats count the etcd face's watch fan-out, for metrics.
type watchStats struct {
	streams, watchers atomic.Int64
	events            atomic.Uint64
	// fromZooKeeper counts the events sent that ZooKeeper clients wrote:
	// the changes that crossed from the ZooKeeper face to this one.
	fromZooKeeper atomic.Uint64
	// fellBehind counts the times a stream's queue was full and the
	// stream went on from history.
	fellBehind atomic.Uint64
}

// WatchStats returns how many watch streams and watchers are open and how
// many events have been sent to watchers.
func (s *Server) WatchStats() (streams, watchers int64, events uint64) {
	return s.watchStats.streams.Load(), s.watchStats.watchers.Load(), s.watchStats.events.Load()
}

// CrossProtocolEvents returns how many events this member has sent to etcd
// watchers that ZooKeeper clients wrote.
func (s *Server) CrossProtocolEvents() uint64 { return s.watchStats.fromZooKeeper.Load() }
