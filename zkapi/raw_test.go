package zkapi_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/januskv/janus/zkapi/jute"
)

var worldAll = jute.ACL{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}

// rawClient speaks the wire protocol directly, for what go-zookeeper
// cannot send or does not show.
type rawClient struct {
	t      testing.TB
	nc     net.Conn
	br     *bufio.Reader
	xid    int32
	events []jute.WatcherEvent // notifications received so far
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawClient) write(recs ...jute.Record) {
	r.t.Helper()
	e := jute.NewEncoder(nil)
	start := e.BeginFrame()
	for _, rec := range recs {
		rec.Encode(e)
	}
	e.EndFrame(start)
	if _, err := r.nc.Write(e.Bytes()); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawClient) read() []byte {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	frame, err := jute.ReadFrame(r.br, 1<<22)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return frame
}

func (r *rawClient) handshake(req jute.ConnectRequest) jute.ConnectResponse {
	r.t.Helper()
	r.write(&req)
	var resp jute.ConnectResponse
	frame := r.read()
	if err := jute.Unmarshal(frame, &resp); err != nil {
		r.t.Fatalf("connect response: %v", err)
	}
	// A 4+4+8+(4+16) body carries no read-only byte.
	resp.HasReadOnly = len(frame) > 36
	return resp
}

// handshakeRO is handshake for requests that carry the read-only flag.
func (r *rawClient) handshakeRO(req jute.ConnectRequest) jute.ConnectResponse {
	r.t.Helper()
	req.HasReadOnly = true
	return r.handshake(req)
}

// call sends one request and returns its reply header, decoding the body
// into resp on success and collecting notifications that come first.
func (r *rawClient) call(op jute.OpCode, req, resp jute.Record) jute.ReplyHeader {
	r.t.Helper()
	r.xid++
	return r.callXid(r.xid, op, req, resp)
}

func (r *rawClient) callXid(xid int32, op jute.OpCode, req, resp jute.Record) jute.ReplyHeader {
	r.t.Helper()
	recs := []jute.Record{&jute.RequestHeader{Xid: xid, Type: op}}
	if req != nil {
		recs = append(recs, req)
	}
	r.write(recs...)
	h, d := r.readReply()
	if h.Xid != xid && !(op == jute.OpPing && h.Xid == jute.XidPing) {
		r.t.Fatalf("reply xid %d, want %d", h.Xid, xid)
	}
	if h.Err == jute.CodeOk && resp != nil {
		resp.Decode(d)
		if d.Err() != nil {
			r.t.Fatalf("decode %v reply: %v", op, d.Err())
		}
	}
	return h
}

// readReply reads frames until one that is not a watch notification and
// returns its header and the decoder positioned at its body; the
// notifications before it are appended to r.events.
func (r *rawClient) readReply() (jute.ReplyHeader, *jute.Decoder) {
	r.t.Helper()
	for {
		d := jute.NewDecoder(r.read())
		var h jute.ReplyHeader
		h.Decode(d)
		if h.Xid != jute.XidNotification {
			return h, d
		}
		var ev jute.WatcherEvent
		ev.Decode(d)
		r.events = append(r.events, ev)
	}
}
