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
		send:     make(chan outgoing, 128),
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

// watchStream is one Watch call: its watchers share one ordered send queue.
type watchStream struct {
	s    *Server
	ctx  context.Context
	send chan outgoing
	wg   sync.WaitGroup // watcher and progress goroutines

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a watcher's sent revision moves
	watchers map[int64]*watcher
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
	ws.wg.Wait()
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
		ctx: ctx, cancel: cancel, done: make(chan struct{}), progress: make(chan struct{}, 1),
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
	ws.wg.Add(1)
	ws.mu.Unlock()
	// The created answer is queued before the watcher can send anything.
	// Creates and cancels all come from the receiving goroutine, so a
	// cancel cannot overtake it either.
	ws.queue(ws.ctx, &pb.WatchResponse{Header: ws.header(cur), WatchId: id, Created: true})

	sub, err := ws.s.b.Watch(start)
	ws.s.watchStats.watchers.Add(1)
	go func() {
		defer ws.wg.Done()
		defer close(w.done)
		defer ws.s.watchStats.watchers.Add(-1)
		w.run(sub, err)
	}()
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
	if ws.watchers[id] == w {
		delete(ws.watchers, id)
		ws.cond.Broadcast()
	}
	ws.mu.Unlock()
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
		if w.sent < rev && !w.ended {
			return false
		}
	}
	return true
}

// tickProgress wakes the watchers that asked for periodic progress.
func (ws *watchStream) tickProgress() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.watchers {
		if w.progressNotify {
			select {
			case w.progress <- struct{}{}:
			default:
			}
		}
	}
}

// watcher is one watch of a stream. Its goroutine owns the subscription.
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
	done       chan struct{}
	progress   chan struct{}
	sentEvents bool // since the last progress tick; owned by run

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
	ended bool
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

func (w *watcher) run(sub *core.Subscription, err error) {
	defer func() {
		w.ws.mu.Lock()
		w.ended = true
		w.ws.cond.Broadcast()
		w.ws.mu.Unlock()
	}()
	if err != nil {
		w.fail(err)
		return
	}
	defer sub.Close()
	for {
		select {
		case re, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					w.fail(err)
				}
				return
			}
			if !w.deliver(re) {
				return
			}
		case <-w.progress:
			if w.sentEvents {
				w.sentEvents = false
				continue
			}
			w.ws.mu.Lock()
			rev := w.sent
			w.ws.mu.Unlock()
			if !w.ws.queue(w.ctx, &pb.WatchResponse{Header: w.ws.header(rev), WatchId: w.id}) {
				return
			}
		case <-w.ctx.Done():
			return
		}
	}
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

// deliver queues the watcher's share of one revision's events.
func (w *watcher) deliver(re core.RevEvents) bool {
	if !w.stillPermitted() {
		w.fail(errPermissionDenied)
		return false
	}
	var events []*mvccpb.Event
	// etcd reads prev_kv at the revision before the event's, so a key
	// written twice in one Txn gets the state from before the Txn both
	// times, not the Txn's intermediate write.
	var before map[string]*core.Node
	if w.prevKV {
		before = map[string]*core.Node{}
		for _, ev := range re.Events {
			if ev.Node == nil || ev.Implicit {
				continue
			}
			if _, seen := before[string(ev.Node.Key)]; !seen {
				before[string(ev.Node.Key)] = ev.Prev
			}
		}
	}
	for _, ev := range re.Events {
		if ev.Implicit || ev.Node == nil || !w.matches(ev.Node.Key) {
			continue
		}
		if w.zkAuth != nil && !core.CheckACL(ev.Node.ACL, core.PermRead, w.zkAuth) {
			w.fail(errPermissionDenied)
			return false
		}
		e := &mvccpb.Event{Kv: keyValue(ev.Node)}
		if ev.Type == core.EventDelete {
			if w.noDelete {
				continue
			}
			e.Type = mvccpb.DELETE
			e.Kv = &mvccpb.KeyValue{Key: ev.Node.Key, ModRevision: ev.Node.ModRev}
		} else if w.noPut {
			continue
		}
		create := e.Type == mvccpb.PUT && e.Kv.CreateRevision == e.Kv.ModRevision
		if prev := before[string(ev.Node.Key)]; w.prevKV && !create && prev != nil && !prev.Implicit && re.Rev > w.compactRev {
			e.PrevKv = keyValue(prev)
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
	w.sent = re.Rev
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
	if w.ws.watchers[w.id] == w {
		delete(w.ws.watchers, w.id)
	}
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
