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
// next (which the hook forces here): a write per reply was the largest
// single cost of a getData. At most two writes per read: the replier's
// once the last buffered request is answered, and the reader's before it
// waits for the socket again.
func TestRepliesToRequestsReadTogetherLeaveTogether(t *testing.T) {
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
	s.afterQueue = func(c *conn) {
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
		frames = append(frames, []jute.Record{&jute.RequestHeader{Xid: int32(i + 1), Type: jute.OpGetData}, &jute.GetDataRequest{Path: "/p"}})
	}
	reads0, writes0 := l.reads.Load(), l.writes.Load()
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
	t.Logf("%d pipelined getData: %d reads, %d writes by the server", n, reads, writes)
	if writes > 2*reads {
		t.Errorf("%d writes for %d requests read in %d reads, want at most %d", writes, n, reads, 2*reads)
	}
}
