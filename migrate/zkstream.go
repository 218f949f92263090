package migrate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/zkapi/jute"
)

// zkStream is one ZooKeeper session on one TCP connection, made for
// following a source: it sets a persistent recursive watch (addWatch,
// ZooKeeper 3.6+, which go-zookeeper does not speak) and reads nodes on
// the same session as the watch. That is what makes following correct:
// ZooKeeper delivers a session's watch events and replies in order, so a
// read sent after an event is answered with data at least as new as the
// change that fired it.
//
// It never reconnects. Any I/O error or session loss ends the stream (Done
// closes, Err says why) and the follower opens a new one and re-lists the
// source, which finds every change the lost stream would have reported.
type zkStream struct {
	conn    net.Conn
	timeout time.Duration

	// notify is called with the watch's notifications in the order the
	// server sent them, from the reader goroutine; it must not block, or
	// pings stop being read and the session expires (see dirtySet).
	notify func(jute.WatcherEvent)

	mu      sync.Mutex // guards xid, pending, err and writes to conn
	xid     int32
	pending map[int32]chan reply
	err     error

	done chan struct{} // closed when the stream has ended
	wg   sync.WaitGroup
}

type reply struct {
	hdr  jute.ReplyHeader
	body []byte
}

// maxReplyFrame bounds one reply. A getChildren reply of a node with very
// many children may exceed ZooKeeper's own 1 MiB request bound.
const maxReplyFrame = 64 << 20

// errStreamClosed ends a stream closed by its owner.
var errStreamClosed = errors.New("ZooKeeper stream closed")

// dialZKStream connects to the first of hosts that answers and opens a new
// session with the given timeout. notify is called, from the stream's
// reader goroutine, for every watch notification; it must not block.
func dialZKStream(ctx context.Context, hosts []string, timeout time.Duration, notify func(jute.WatcherEvent)) (*zkStream, error) {
	var errs []error
	for _, h := range hosts {
		s, err := dialZKStreamHost(ctx, h, timeout, notify)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("connect to ZooKeeper %s: %w", strings.Join(hosts, ","), errors.Join(errs...))
}

func dialZKStreamHost(ctx context.Context, host string, timeout time.Duration, notify func(jute.WatcherEvent)) (*zkStream, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	if dl, ok := dctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	req := jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond), Passwd: make([]byte, 16), HasReadOnly: true}
	frame := jute.NewEncoder(nil)
	start := frame.BeginFrame()
	req.Encode(frame)
	frame.EndFrame(start)
	br := bufio.NewReader(conn)
	var resp jute.ConnectResponse
	if _, err := conn.Write(frame.Bytes()); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: connect: %w", host, err)
	}
	body, err := jute.ReadFrame(br, maxReplyFrame)
	if err == nil {
		err = jute.Unmarshal(body, &resp)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: connect: %w", host, err)
	}
	if resp.SessionID == 0 || resp.TimeOut <= 0 {
		conn.Close()
		return nil, fmt.Errorf("%s: session refused", host)
	}
	conn.SetDeadline(time.Time{})
	s := &zkStream{
		conn:    conn,
		timeout: time.Duration(resp.TimeOut) * time.Millisecond,
		notify:  notify,
		pending: map[int32]chan reply{},
		done:    make(chan struct{}),
	}
	s.wg.Add(2)
	go s.read(br)
	go s.ping()
	return s, nil
}

// fail ends the stream with err (the first error wins) and wakes every
// caller waiting for a reply.
func (s *zkStream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	close(s.done)
	s.conn.Close()
	for xid, ch := range s.pending {
		close(ch)
		delete(s.pending, xid)
	}
}

// Done is closed when the stream has ended.
func (s *zkStream) Done() <-chan struct{} { return s.done }

// Err says why the stream ended, once Done is closed.
func (s *zkStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// close ends the stream and waits for its goroutines. Closing the
// connection without closeSession lets the server expire the session; it
// holds no ephemerals, so nothing waits on that.
func (s *zkStream) close() {
	s.fail(errStreamClosed)
	s.wg.Wait()
}

// read dispatches replies to their callers and notifications to notify.
// The server's reads time out after two thirds of the session timeout
// without a frame; pings every third keep it below that.
func (s *zkStream) read(br *bufio.Reader) {
	defer s.wg.Done()
	for {
		s.conn.SetReadDeadline(time.Now().Add(s.timeout))
		body, err := jute.ReadFrame(br, maxReplyFrame)
		if err != nil {
			s.fail(fmt.Errorf("read from ZooKeeper: %w", err))
			return
		}
		var hdr jute.ReplyHeader
		d := jute.NewDecoder(body)
		hdr.Decode(d)
		if d.Err() != nil {
			s.fail(fmt.Errorf("read from ZooKeeper: reply header: %w", d.Err()))
			return
		}
		rest := body[jute.ReplyHeaderSize:]
		switch hdr.Xid {
		case jute.XidNotification:
			var ev jute.WatcherEvent
			if err := jute.Unmarshal(rest, &ev); err != nil {
				s.fail(fmt.Errorf("read from ZooKeeper: watch event: %w", err))
				return
			}
			if ev.Type == jute.EventNone {
				// A state change the server sends (expiry, close):
				// the session is no longer ours to read through.
				s.fail(fmt.Errorf("ZooKeeper session event %v", ev.State))
				return
			}
			s.notify(ev)
		case jute.XidPing:
		default: // replies, and XidAuth's
			s.mu.Lock()
			ch, ok := s.pending[hdr.Xid]
			delete(s.pending, hdr.Xid)
			s.mu.Unlock()
			if ok {
				ch <- reply{hdr: hdr, body: rest}
			}
		}
	}
}

func (s *zkStream) ping() {
	defer s.wg.Done()
	t := time.NewTicker(s.timeout / 3)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if err := s.send(jute.XidPing, jute.OpPing, nil); err != nil {
				s.fail(fmt.Errorf("ping ZooKeeper: %w", err))
				return
			}
		}
	}
}

// send writes one request frame.
func (s *zkStream) send(xid int32, op jute.OpCode, req jute.Record) error {
	e := jute.NewEncoder(nil)
	start := e.BeginFrame()
	hdr := jute.RequestHeader{Xid: xid, Type: op}
	hdr.Encode(e)
	if req != nil {
		req.Encode(e)
	}
	e.EndFrame(start)
	if e.Err() != nil {
		return e.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	_, err := s.conn.Write(e.Bytes())
	return err
}

// call sends req and decodes the reply into resp (nil: no body expected).
// A NoNode reply returns an error matching zk.ErrNoNode, so callers written
// for go-zookeeper treat both alike.
func (s *zkStream) call(ctx context.Context, op jute.OpCode, path string, req, resp jute.Record) error {
	return s.callXid(ctx, 0, op, path, req, resp)
}

// callXid is call with a fixed xid (0: the next one), for the requests
// ZooKeeper answers with a reserved xid. At most one such call may run at
// a time.
func (s *zkStream) callXid(ctx context.Context, xid int32, op jute.OpCode, path string, req, resp jute.Record) error {
	ch := make(chan reply, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if xid == 0 {
		s.xid++
		xid = s.xid
	}
	s.pending[xid] = ch
	s.mu.Unlock()
	if err := s.send(xid, op, req); err != nil {
		s.fail(fmt.Errorf("write to ZooKeeper: %w", err))
		return s.Err()
	}
	var r reply
	var ok bool
	select {
	case r, ok = <-ch:
		if !ok {
			return s.Err()
		}
	case <-ctx.Done():
		// The reply may still come; the stream is out of step with its
		// caller now, so it ends.
		s.fail(ctx.Err())
		return ctx.Err()
	}
	switch r.hdr.Err {
	case jute.CodeOk:
	case jute.CodeNoNode:
		return fmt.Errorf("%v %s: %w", op, path, zk.ErrNoNode)
	default:
		return fmt.Errorf("%v %s: %s", op, path, r.hdr.Err.Message())
	}
	if resp == nil {
		return nil
	}
	if err := jute.Unmarshal(r.body, resp); err != nil {
		s.fail(fmt.Errorf("%v %s: decode reply: %w", op, path, err))
		return s.Err()
	}
	return nil
}

// addAuth adds an identity to the session, as zkCli's addauth does; a
// refused one ends the session (ZooKeeper closes it).
func (s *zkStream) addAuth(ctx context.Context, a Auth) error {
	return s.callXid(ctx, jute.XidAuth, jute.OpAuth, "", &jute.AuthPacket{Scheme: a.Scheme, Auth: a.Credentials}, nil)
}

// addWatch sets a persistent recursive watch on path: every create,
// delete and data change at or below it is notified, for as long as the
// session lives. It needs ZooKeeper 3.6 or later.
func (s *zkStream) addWatch(ctx context.Context, path string) error {
	return s.call(ctx, jute.OpAddWatch, path, &jute.AddWatchRequest{Path: path, Mode: jute.AddWatchPersistentRecursive}, nil)
}

// barrier returns once every change the server applied before it was
// called has been notified: sync brings the session's server up to date
// with the leader, and the server sends a session's notifications and
// replies in order.
func (s *zkStream) barrier(ctx context.Context, path string) error {
	return s.call(ctx, jute.OpSync, path, &jute.SyncRequest{Path: path}, &jute.SyncResponse{})
}

// countBelow returns how many nodes are below path (getAllChildrenNumber,
// ZooKeeper 3.6+); it is what a copy's progress and ETA are measured against.
func (s *zkStream) countBelow(ctx context.Context, path string) (int, error) {
	var resp jute.GetAllChildrenNumberResponse
	err := s.call(ctx, jute.OpGetAllChildrenNumber, path, &jute.GetAllChildrenNumberRequest{Path: path}, &resp)
	return int(resp.TotalNumber), err
}

// zkReader is what walking a tree reads: *zk.Conn, or a zkStream bound to
// a context.
type zkReader interface {
	Get(path string) ([]byte, *zk.Stat, error)
	GetACL(path string) ([]zk.ACL, *zk.Stat, error)
	Children(path string) ([]string, *zk.Stat, error)
}

// streamReader reads through a zkStream with go-zookeeper's signatures.
type streamReader struct {
	ctx context.Context
	s   *zkStream
}

func (r streamReader) Get(path string) ([]byte, *zk.Stat, error) {
	var resp jute.GetDataResponse
	if err := r.s.call(r.ctx, jute.OpGetData, path, &jute.GetDataRequest{Path: path}, &resp); err != nil {
		return nil, nil, err
	}
	return resp.Data, zkStat(resp.Stat), nil
}

func (r streamReader) GetACL(path string) ([]zk.ACL, *zk.Stat, error) {
	var resp jute.GetACLResponse
	if err := r.s.call(r.ctx, jute.OpGetACL, path, &jute.GetACLRequest{Path: path}, &resp); err != nil {
		return nil, nil, err
	}
	acl := make([]zk.ACL, len(resp.ACL))
	for i, a := range resp.ACL {
		acl[i] = zk.ACL{Perms: a.Perms, Scheme: a.ID.Scheme, ID: a.ID.ID}
	}
	return acl, zkStat(resp.Stat), nil
}

func (r streamReader) Children(path string) ([]string, *zk.Stat, error) {
	var resp jute.GetChildren2Response
	if err := r.s.call(r.ctx, jute.OpGetChildren2, path, &jute.GetChildren2Request{Path: path}, &resp); err != nil {
		return nil, nil, err
	}
	return resp.Children, zkStat(resp.Stat), nil
}

func zkStat(s jute.Stat) *zk.Stat {
	return &zk.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength,
		NumChildren: s.NumChildren, Pzxid: s.Pzxid,
	}
}
