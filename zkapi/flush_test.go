package zkapi

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/testlog"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi/jute"
)

// countingListener counts the reads that returned data and the writes on
// the connections it accepts.
type countingListener struct {
	net.Listener
	reads, writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: nc, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.l.reads.Add(1)
	}
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(p)
}

// The replies to requests read from the socket together leave together,
// even when the replier answers each before the reader has queued the
// next (which the hook forces here for getACL): a write per reply was the
// largest single cost of a getData. At most two writes per read: the
// replier's once the last buffered request is answered, and the reader's
// before it waits for the socket again. A plain getData with nothing
// before it unanswered is the reader's own to answer (answersInline): it
// never reaches the queue, and its replies leave together too.
func TestRepliesToRequestsReadTogetherLeaveTogether(t *testing.T) {
	for _, c := range []struct {
		op     jute.OpCode
		req    jute.Record
		queued bool
	}{
		{jute.OpGetData, &jute.GetDataRequest{Path: "/p"}, false},
		{jute.OpGetACL, &jute.GetACLRequest{Path: "/p"}, true},
	} {
		t.Run(c.op.String(), func(t *testing.T) { repliesLeaveTogether(t, c.op, c.req, c.queued) })
	}
}

func repliesLeaveTogether(t *testing.T, op jute.OpCode, req jute.Record, queued bool) {
	m, err := server.OpenMember(server.MemberConfig{DataDir: t.TempDir(), Logger: testlog.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Propose(t.Context(), &core.Op{Txn: &core.Txn{Success: []core.TxnOp{
		{Kind: core.OpCreate, Key: []byte("/p"), Value: []byte("v"), Create: &core.CreateOptions{}},
	}}}); err != nil {
		t.Fatal(err)
	}
	s := New(m, Config{Logger: testlog.New(t), Dirs: m.Dirs})
	var queuedReqs atomic.Int64
	s.afterQueue = func(c *conn) {
		queuedReqs.Add(1)
		// Let the replier answer this request, and find the queue
		// empty, before the next one is read.
		for c.outstanding.Load() > 0 && c.ctx.Err() == nil {
			time.Sleep(100 * time.Microsecond)
		}
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: inner}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	defer func() { s.Close(); <-done }()

	nc, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(nc)
	send := func(frames ...[]jute.Record) {
		t.Helper()
		e := jute.NewEncoder(nil)
		for _, recs := range frames {
			start := e.BeginFrame()
			for _, r := range recs {
				r.Encode(e)
			}
			e.EndFrame(start)
		}
		if _, err := nc.Write(e.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *jute.Decoder {
		t.Helper()
		frame, err := jute.ReadFrame(br, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return jute.NewDecoder(frame)
	}
	send([]jute.Record{&jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}})
	read()

	const n = 20
	var frames [][]jute.Record
	for i := range n {
		frames = append(frames, []jute.Record{&jute.RequestHeader{Xid: int32(i + 1), Type: op}, req})
	}
	reads0, writes0, queued0 := l.reads.Load(), l.writes.Load(), queuedReqs.Load()
	send(frames...)
	for i := range n {
		d := read()
		var h jute.ReplyHeader
		h.Decode(d)
		if h.Xid != int32(i+1) || h.Err != jute.CodeOk {
			t.Fatalf("reply %d: xid %d, err %v", i, h.Xid, h.Err)
		}
	}
	reads, writes := l.reads.Load()-reads0, l.writes.Load()-writes0
	t.Logf("%d pipelined %v: %d reads, %d writes by the server", n, op, reads, writes)
	if got, want := queuedReqs.Load()-queued0, map[bool]int64{true: n, false: 0}[queued]; got != want {
		t.Errorf("%d of %d requests went through the replier's queue, want %d", got, n, want)
	}
	if writes > 2*reads {
		t.Errorf("%d writes for %d requests read in %d reads, want at most %d", writes, n, reads, 2*reads)
	}
}
