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
		watchers: map[int64]*watcher{},
	}
	ws.cond = sync.NewCond(&ws.mu)
	defer ws.close()
	w.s.watchStats.streams.Add(1)
	defer w.s.watchStats.streams.Add(-1)

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

// watchStream is one Watch call: its watchers share one ordered send queue
// and one feed of committed revisions.
type watchStream struct {
	s    *Server
	ctx  context.Context
	stop context.CancelFunc
	send chan outgoing
	tick chan struct{}  // progress interval elapsed; read by the dispatcher
	wg   sync.WaitGroup // dispatcher, catch-up and progress goroutines

	// deliverMu is held while the dispatcher queues one revision's
	// events, so a cancel can wait out a delivery already under way.
	deliverMu sync.Mutex

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a watcher's sent revision moves
	watchers map[int64]*watcher
	feed     *feed // nil until the first watcher, and after it ends
	nextID   int64
	closed   bool
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

// feed is a stream's one hub subscription, and the index of the stream's
// live watchers its dispatcher matches each revision against: a write
// costs the apply path one send per stream, however many watchers the
// stream has, and costs the stream work only for the watchers its keys
// match (etcd's synced watcher group). A watcher that starts below the
// revision the feed has reached first replays history on its own, then
// joins (etcd's unsynced group).
type feed struct {
	sub *core.Subscription

	// Guarded by ws.mu.
	taken  int64                            // the dispatcher has chosen the watchers of every revision up to this one
	done   int64                            // and queued their events
	keys   map[string]map[*watcher]struct{} // live watchers of one key
	ranges map[*watcher]struct{}            // live watchers of a range, prefix or every key from one on
	err    error                            // why the subscription ended
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
		sent: start - 1,
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

// start makes w live on the stream's feed if the feed has not passed the
// revision before w's start, or else replays history to it first.
func (ws *watchStream) start(w *watcher, cur int64) {
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		close(w.done)
		return
	}
	f, err := ws.feedLocked(cur)
	if err != nil {
		ws.mu.Unlock()
		close(w.done)
		w.fail(err)
		return
	}
	w.feed = f
	if w.sent >= f.taken {
		f.joinLocked(w)
		ws.mu.Unlock()
		close(w.done)
		return
	}
	ws.wg.Add(1)
	ws.mu.Unlock()
	go func() {
		defer ws.wg.Done()
		defer close(w.done)
		ws.catchUp(w)
	}()
}

// feedLocked returns the stream's feed, subscribing it from the revision
// after cur if it has none.
func (ws *watchStream) feedLocked(cur int64) (*feed, error) {
	if ws.feed != nil {
		return ws.feed, nil
	}
	sub, err := ws.s.b.Watch(cur + 1)
	if err != nil {
		return nil, err
	}
	f := &feed{sub: sub, taken: cur, done: cur, keys: map[string]map[*watcher]struct{}{}, ranges: map[*watcher]struct{}{}}
	ws.feed = f
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		ws.dispatch(f)
	}()
	return f, nil
}

func (f *feed) joinLocked(w *watcher) {
	w.live = true
	if !w.singleKey() {
		f.ranges[w] = struct{}{}
		return
	}
	set := f.keys[string(w.key)]
	if set == nil {
		set = map[*watcher]struct{}{}
		f.keys[string(w.key)] = set
	}
	set[w] = struct{}{}
}

func (f *feed) leaveLocked(w *watcher) {
	if !w.live {
		return
	}
	w.live = false
	if !w.singleKey() {
		delete(f.ranges, w)
		return
	}
	set := f.keys[string(w.key)]
	delete(set, w)
	if len(set) == 0 {
		delete(f.keys, string(w.key))
	}
}

// matchLocked returns the live watchers that one of re's events concerns
// and that have not had re yet, each once.
func (f *feed) matchLocked(re core.RevEvents) []*watcher {
	var out []*watcher
	add := func(w *watcher) {
		if w.mark != re.Rev && w.sent < re.Rev {
			w.mark = re.Rev
			out = append(out, w)
		}
	}
	for _, ev := range re.Events {
		if ev.Implicit || ev.Node == nil {
			continue
		}
		for w := range f.keys[string(ev.Node.Key)] {
			add(w)
		}
		for w := range f.ranges {
			if w.matches(ev.Node.Key) {
				add(w)
			}
		}
	}
	return out
}

// dispatch hands each revision of the feed to the live watchers it
// concerns, and sends the periodic progress notifications, until the
// stream or the subscription ends.
func (ws *watchStream) dispatch(f *feed) {
	defer f.sub.Close()
	for {
		select {
		case re, ok := <-f.sub.Events():
			if !ok {
				ws.endFeed(f, f.sub.Err())
				return
			}
			ws.mu.Lock()
			f.taken = re.Rev
			targets := f.matchLocked(re)
			ws.mu.Unlock()
			if len(targets) > 0 {
				rv := &revView{re: re}
				ws.deliverMu.Lock()
				for _, w := range targets {
					w.deliver(rv)
				}
				ws.deliverMu.Unlock()
			}
			ws.mu.Lock()
			f.done = re.Rev
			ws.cond.Broadcast()
			ws.mu.Unlock()
		case <-ws.tick:
			ws.sendProgress(f)
		case <-ws.ctx.Done():
			return
		}
	}
}

// endFeed ends the feed's watchers when its subscription failed (the
// member stopped, or the stream fell behind a compaction); the next
// create subscribes anew.
func (ws *watchStream) endFeed(f *feed, err error) {
	if err == nil {
		return
	}
	ws.mu.Lock()
	f.err = err
	if ws.feed == f {
		ws.feed = nil
	}
	var live []*watcher
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
	for {
		ws.mu.Lock()
		switch {
		case w.ctx.Err() != nil || w.ended:
			ws.mu.Unlock()
			return
		case f.err != nil:
			ws.mu.Unlock()
			w.fail(f.err)
			return
		case w.sent >= f.taken:
			f.joinLocked(w)
			ws.mu.Unlock()
			return
		}
		from, to := w.sent+1, min(f.taken, w.sent+core.CatchUpChunk)
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
	if w.feed != nil {
		w.feed.leaveLocked(w)
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
	// Wait out a delivery the dispatcher may have begun before the
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
	for _, w := range ws.watchers {
		if w.sentLocked() < rev && !w.ended {
			return false
		}
	}
	return true
}

// tickProgress tells the dispatcher the progress interval has elapsed.
func (ws *watchStream) tickProgress() {
	select {
	case ws.tick <- struct{}{}:
	default:
	}
}

// sendProgress sends a progress notification to every live watcher of f
// that asked for them and got no events since the last one. As in etcd,
// a watcher still replaying history gets none.
func (ws *watchStream) sendProgress(f *feed) {
	type note struct {
		w   *watcher
		rev int64
	}
	var notes []note
	ws.mu.Lock()
	for _, w := range ws.watchers {
		if !w.progressNotify || !w.live || w.feed != f || w.ended {
			continue
		}
		if w.sentEvents {
			w.sentEvents = false
			continue
		}
		notes = append(notes, note{w, w.sentLocked()})
	}
	ws.mu.Unlock()
	for _, n := range notes {
		ws.queue(n.w.ctx, &pb.WatchResponse{Header: ws.header(n.rev), WatchId: n.w.id})
	}
}

// watcher is one watch of a stream. It has a goroutine only while it
// replays history; live, the stream's dispatcher delivers to it.
type watcher struct {
	ws               *watchStream
	id               int64
	key, end         []byte
	fromKey          bool
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
	// the watcher's one sender (catch-up, then the dispatcher) touches it.
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
	sent  int64 // every event up to this revision is queued
	feed  *feed // set when the watcher starts
	live  bool  // in the feed's index
	mark  int64 // the revision matchLocked last chose it for
	ended bool
}

// sentLocked is the revision up to which the watcher has every event
// queued: a live watcher has everything its feed has finished.
func (w *watcher) sentLocked() int64 {
	if w.live {
		return max(w.sent, w.feed.done)
	}
	return w.sent
}

func (w *watcher) singleKey() bool { return !w.fromKey && len(w.end) == 0 }

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
// One goroutine uses it.
type revView struct {
	re      core.RevEvents
	kvs     []*mvccpb.KeyValue
	prevKVs map[string]*mvccpb.KeyValue
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

// deliver queues the watcher's share of one revision's events. It returns
// false once the watcher has ended.
func (w *watcher) deliver(rv *revView) bool {
	re := rv.re
	if !w.stillPermitted() {
		w.fail(errPermissionDenied)
		return false
	}
	var events []*mvccpb.Event
	for i, ev := range re.Events {
		if ev.Implicit || ev.Node == nil || !w.matches(ev.Node.Key) {
			continue
		}
		if w.zkAuth != nil && !core.CheckACL(ev.Node.ACL, core.PermRead, w.zkAuth) {
			w.fail(errPermissionDenied)
			return false
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
	if len(events) > 0 {
		resp := &pb.WatchResponse{Header: w.ws.header(re.Rev), WatchId: w.id, Events: events}
		if !w.ws.queueOut(w.ctx, outgoing{resp: resp, fragment: w.fragment}) {
			return false
		}
		w.ws.s.watchStats.events.Add(uint64(len(events)))
		if re.Origin == core.OriginZooKeeper {
			w.ws.s.watchStats.fromZooKeeper.Add(uint64(len(events)))
		}
		w.sentEvents = true
	}
	w.ws.mu.Lock()
	w.sent = max(w.sent, re.Rev)
	w.ws.cond.Broadcast()
	w.ws.mu.Unlock()
	return true
}

// errPermissionDenied ends a watcher whose user lost the right to read.
var errPermissionDenied = &core.Error{Code: core.CodeAuthPermissionDenied}

// fail ends the watcher: a compacted start revision is reported as etcd
// reports it (compact_revision set, canceled, header revision 0), anything
// else as a cancel with a reason.
func (w *watcher) fail(err error) {
	resp := &pb.WatchResponse{Header: w.ws.header(0), WatchId: w.id, Canceled: true}
	if errors.Is(err, core.ErrCompacted) {
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
}

// WatchStats returns how many watch streams and watchers are open and how
// many events have been sent to watchers.
func (s *Server) WatchStats() (streams, watchers int64, events uint64) {
	return s.watchStats.streams.Load(), s.watchStats.watchers.Load(), s.watchStats.events.Load()
}

// CrossProtocolEvents returns how many events this member has sent to etcd
// watchers that ZooKeeper clients wrote.
func (s *Server) CrossProtocolEvents() uint64 { return s.watchStats.fromZooKeeper.Load() }
