package zkapi_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// pipelined sends reqs in one write, then reads a reply for each, in order.
// A reply's body is decoded into reqs[i].resp when it succeeds. For each
// notification received meanwhile (appended to r.events), eventAt says how
// many replies came before it.
func (r *rawClient) pipelined(reqs []rawReq) (hdrs []jute.ReplyHeader, eventAt []int) {
	r.t.Helper()
	e := jute.NewEncoder(nil)
	xids := make([]int32, len(reqs))
	for i, q := range reqs {
		r.xid++
		xids[i] = r.xid
		start := e.BeginFrame()
		(&jute.RequestHeader{Xid: r.xid, Type: q.op}).Encode(e)
		if q.req != nil {
			q.req.Encode(e)
		}
		e.EndFrame(start)
	}
	if _, err := r.nc.Write(e.Bytes()); err != nil {
		r.t.Fatalf("write: %v", err)
	}
	hdrs = make([]jute.ReplyHeader, 0, len(reqs))
	for len(hdrs) < len(reqs) {
		before := len(r.events)
		h, d := r.readReply()
		for range len(r.events) - before {
			eventAt = append(eventAt, len(hdrs))
		}
		i := len(hdrs)
		if h.Xid != xids[i] {
			r.t.Fatalf("reply %d has xid %d, want %d: replies out of order", i, h.Xid, xids[i])
		}
		if h.Err == jute.CodeOk && reqs[i].resp != nil {
			reqs[i].resp.Decode(d)
			if d.Err() != nil {
				r.t.Fatalf("decode reply %d (%v): %v", i, reqs[i].op, d.Err())
			}
		}
		hdrs = append(hdrs, h)
	}
	return hdrs, eventAt
}

type rawReq struct {
	op        jute.OpCode
	req, resp jute.Record
}

// TestPipelinedRequestsAnsweredInOrder sends one session's requests back
// to back without waiting for replies: dependent creates must all succeed
// in order, reads must see the writes before them, a refused write must
// not disturb the ones after it, and closeSession must come last.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c := dialRaw(t, j.Addr)
	c.handshake(jute.ConnectRequest{TimeOut: 10000})

	var reqs []rawReq
	path := ""
	var creates []*jute.CreateResponse
	for i := range 20 {
		path += fmt.Sprintf("/n%d", i)
		resp := &jute.CreateResponse{}
		creates = append(creates, resp)
		reqs = append(reqs, rawReq{jute.OpCreate, &jute.CreateRequest{Path: path, Data: []byte{byte(i)}, ACL: []jute.ACL{worldAll}}, resp})
	}
	deepest := path
	get1 := &jute.GetDataResponse{}
	set := &jute.SetDataResponse{}
	plain := &jute.GetDataResponse{}
	get2 := &jute.GetDataResponse{}
	kids := &jute.GetChildrenResponse{}
	reqs = append(reqs,
		rawReq{jute.OpGetData, &jute.GetDataRequest{Path: deepest}, get1},
		rawReq{jute.OpSetData, &jute.SetDataRequest{Path: deepest, Data: []byte("second"), Version: 0}, set},
		// A plain read behind a write still waiting for its commit is
		// the replier's, not the reader's to answer at once (answersInline).
		rawReq{jute.OpGetData, &jute.GetDataRequest{Path: deepest}, plain},
		rawReq{jute.OpGetData, &jute.GetDataRequest{Path: deepest, Watch: true}, get2},
		rawReq{jute.OpDelete, &jute.DeleteRequest{Path: "/missing", Version: -1}, nil},               // refused: NoNode
		rawReq{jute.OpCreate, &jute.CreateRequest{Path: "no-slash", ACL: []jute.ACL{worldAll}}, nil}, // refused before submitting
		rawReq{jute.OpCreate, &jute.CreateRequest{Path: "/n0/e", ACL: []jute.ACL{worldAll}, Flags: jute.ModeEphemeral}, nil},
		rawReq{jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/n0"}, kids},
	)
	hdrs, _ := c.pipelined(reqs)
	var last int64
	for i, h := range hdrs {
		want := jute.CodeOk
		switch i {
		case 24:
			want = jute.CodeNoNode
		case 25:
			want = jute.CodeBadArguments
		}
		if h.Err != want {
			t.Fatalf("request %d (%v): err %v, want %v", i, reqs[i].op, h.Err, want)
		}
		if h.Zxid < last {
			t.Errorf("request %d: zxid %d after %d", i, h.Zxid, last)
		}
		last = h.Zxid
	}
	path = ""
	for i, cr := range creates {
		path += fmt.Sprintf("/n%d", i)
		if cr.Path != path {
			t.Errorf("create %d made %q, want %q", i, cr.Path, path)
		}
	}
	if len(get1.Data) != 1 || get1.Data[0] != 19 || get1.Stat.Version != 0 {
		t.Errorf("read after create: %q %+v", get1.Data, get1.Stat)
	}
	if string(plain.Data) != "second" || plain.Stat.Version != 1 {
		t.Errorf("plain read after setData: %q %+v", plain.Data, plain.Stat)
	}
	if string(get2.Data) != "second" || get2.Stat.Version != 1 || get2.Stat.Mzxid != set.Stat.Mzxid {
		t.Errorf("read after setData: %q %+v, set %+v", get2.Data, get2.Stat, set.Stat)
	}
	if fmt.Sprint(kids.Children) != "[e n1]" && fmt.Sprint(kids.Children) != "[n1 e]" {
		t.Errorf("children of /n0 = %v", kids.Children)
	}

	// The ephemeral goes with the session; closeSession is answered after
	// the requests before it.
	hdrs, _ = c.pipelined([]rawReq{
		{jute.OpSetData, &jute.SetDataRequest{Path: deepest, Data: []byte("third"), Version: -1}, nil},
		{jute.OpCloseSession, nil, nil},
	})
	if hdrs[0].Err != jute.CodeOk || hdrs[1].Err != jute.CodeOk || hdrs[1].Zxid <= hdrs[0].Zxid {
		t.Fatalf("setData then closeSession: %+v", hdrs)
	}
	// The watch set above fired, before the reply to setData.
	if len(c.events) != 1 || c.events[0].Type != jute.EventNodeDataChanged || c.events[0].Path != deepest {
		t.Errorf("events %+v, want one NodeDataChanged on %s", c.events, deepest)
	}
	zc, _ := connect(t, j.Addr, 10*time.Second)
	if ok, _, err := zc.Exists("/n0/e"); ok || err != nil {
		t.Errorf("ephemeral after closeSession: exists %v, %v", ok, err)
	}
}

// TestOneSessionManyConcurrentWrites drives one go-zookeeper session from
// many goroutines, which go-zookeeper pipelines over its one connection:
// every create and setData must succeed, and each goroutine's read right
// after its write must see it.
func TestOneSessionManyConcurrentWrites(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c, _ := connect(t, j.Addr, 10*time.Second)
	if _, err := c.Create("/p", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				dir := fmt.Sprintf("/p/w%d", w)
				if _, err := c.Create(dir, nil, 0, openACL); err != nil {
					return fmt.Errorf("create %s: %w", dir, err)
				}
				for i := range rounds {
					p := fmt.Sprintf("%s/n%d", dir, i)
					want := fmt.Sprintf("%d.%d", w, i)
					if _, err := c.Create(p, []byte(want), 0, openACL); err != nil {
						return fmt.Errorf("create %s: %w", p, err)
					}
					if got, _, err := c.Get(p); err != nil || string(got) != want {
						return fmt.Errorf("get %s after create = %q, %v; want %q", p, got, err, want)
					}
					want += "!"
					if _, err := c.Set(p, []byte(want), 0); err != nil {
						return fmt.Errorf("set %s: %w", p, err)
					}
					if got, st, err := c.Get(p); err != nil || string(got) != want || st.Version != 1 {
						return fmt.Errorf("get %s after set = %q %+v, %v; want %q", p, got, st, err, want)
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	n := 0
	for w := range workers {
		kids, _, err := c.Children(fmt.Sprintf("/p/w%d", w))
		if err != nil {
			t.Fatal(err)
		}
		n += len(kids)
	}
	if n != workers*rounds {
		t.Errorf("%d nodes, want %d", n, workers*rounds)
	}
}

// gatedBackend holds back the result of every write until a number of
// writes have been submitted: a connection that waited for one write's
// result before submitting the next would never get there.
type gatedBackend struct {
	*server.Member
	need   int
	mu     sync.Mutex
	seen   int
	opened chan struct{}
}

func (b *gatedBackend) Submit(ctx context.Context, op *core.Op) (core.Pending, error) {
	p, err := b.Member.Submit(ctx, op)
	if err != nil {
		return nil, err
	}
	if op.Txn == nil {
		return p, nil
	}
	b.mu.Lock()
	if b.seen++; b.seen == b.need {
		close(b.opened)
	}
	b.mu.Unlock()
	return gatedPending{p, b.opened}, nil
}

type gatedPending struct {
	core.Pending
	opened <-chan struct{}
}

func (p gatedPending) Answered() bool {
	select {
	case <-p.opened:
		return p.Pending.Answered()
	default:
		return false
	}
}

func (p gatedPending) Wait(ctx context.Context) (*core.Result, error) {
	select {
	case <-p.opened:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		return nil, errors.New("the writes after this one were never submitted")
	}
	return p.Pending.Wait(ctx)
}

// TestWritesSubmittedBeforeEarlierOnesComplete shows that a session keeps
// several writes in flight: no write's result is released until all of
// them have been submitted.
func TestWritesSubmittedBeforeEarlierOnesComplete(t *testing.T) {
	const n = 10
	j := startJanusOn(t, zkapi.Config{}, func(m *server.Member) core.Backend {
		return &gatedBackend{Member: m, need: n, opened: make(chan struct{})}
	})
	c := dialRaw(t, j.Addr)
	c.handshake(jute.ConnectRequest{TimeOut: 30000})
	var reqs []rawReq
	for i := range n {
		reqs = append(reqs, rawReq{jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/g%d", i), ACL: []jute.ACL{worldAll}}, nil})
	}
	hdrs, _ := c.pipelined(reqs)
	for i, h := range hdrs {
		if h.Err != jute.CodeOk {
			t.Errorf("create %d: %v", i, h.Err)
		}
	}
}

// TestWatchReplyPrecedesItsEvent pipelines a read that sets a watch and the
// write that fires it: the client must get the read's reply, which
// registers the watch on its side, before the event.
func TestWatchReplyPrecedesItsEvent(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c := dialRaw(t, j.Addr)
	c.handshake(jute.ConnectRequest{TimeOut: 10000})
	for i := range 20 {
		p := fmt.Sprintf("/w%d", i)
		c.events = nil
		hdrs, eventAt := c.pipelined([]rawReq{
			{jute.OpExists, &jute.ExistsRequest{Path: p, Watch: true}, nil},
			{jute.OpCreate, &jute.CreateRequest{Path: p, ACL: []jute.ACL{worldAll}}, nil},
			{jute.OpGetData, &jute.GetDataRequest{Path: p, Watch: true}, nil},
			{jute.OpSetData, &jute.SetDataRequest{Path: p, Version: -1}, nil},
		})
		if hdrs[0].Err != jute.CodeNoNode || hdrs[1].Err != jute.CodeOk || hdrs[2].Err != jute.CodeOk || hdrs[3].Err != jute.CodeOk {
			t.Fatalf("round %d: replies %+v", i, hdrs)
		}
		if len(c.events) != 2 || c.events[0].Type != jute.EventNodeCreated || c.events[1].Type != jute.EventNodeDataChanged {
			t.Fatalf("round %d: events %+v", i, c.events)
		}
		// Each event after the reply that set its watch, and before the
		// reply to the write that fired it.
		if eventAt[0] != 1 || eventAt[1] != 3 {
			t.Fatalf("round %d: events after %v replies, want [1 3]", i, eventAt)
		}
	}
}
