package zkapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/saslmd5"
	"github.com/januskv/janus/translate"
	"github.com/januskv/janus/zkapi/jute"
)

// writeTimeout bounds one write to a client; a client that reads nothing
// for that long is cut off rather than holding its queue forever.
const writeTimeout = 30 * time.Second

// conn is one client connection. Its reader goroutine (run) owns the
// session fields and reads and prepares requests; its replier goroutine
// answers them in order (see pipeline.go); the writer goroutine only
// drains out.
type conn struct {
	srv    *Server
	nc     net.Conn
	br     *bufio.Reader
	out    *outQueue
	log    *slog.Logger
	remote string // client IP, the session's "ip" identity

	ctx    context.Context // ends when the connection closes
	cancel context.CancelFunc
	closed sync.Once
	done   chan struct{} // closed when the writer has stopped

	// Set by the handshake; read by other goroutines (4lw, admin).
	session atomic.Pointer[session]
	// auth is the session's identities; guarded by authMu for readers
	// outside the reader goroutine.
	authMu sync.Mutex
	auth   []core.ID
	// ids is auth in ZooKeeper's order as the reader last set it; each
	// request keeps the slice it was read with.
	ids []core.ID // reader only
	// The reader submits a write only once every request queued before
	// it that is not a write has been answered: readsQueued of them
	// were queued, readsAnswered answered (the replier counts, and pokes
	// barrierWake after each).
	readsQueued   int64 // reader only
	readsAnswered atomic.Int64
	barrierWake   chan struct{}
	// readAhead says the reader's buffer held more bytes after the frame
	// it read last: another request is on its way to the queue without
	// a read from the socket, so the replier need not flush yet (see
	// replyLoop).
	readAhead atomic.Bool
	// dec decodes each request the reader reads.
	dec jute.Decoder // reader only
	// saslServer is the connection's SASL exchange, once begun.
	saslServer *saslmd5.Server // reader only

	// Counters for cons/stat.
	received    atomic.Int64
	sent        atomic.Int64
	outstanding atomic.Int64 // requests read and not yet answered
	lastActive  atomic.Int64 // ms since the epoch of the last frame read
	stats       connStats
	started     time.Time
	lastKA      time.Time // reader only: the last renewal a leader took
	nextKA      time.Time // reader only: when to renew next
}

// session is a ZooKeeper session as one connection holds it.
type session struct {
	id       int64
	timeout  time.Duration
	password []byte
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	remote := ""
	if addr, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		remote = addr.IP.String()
	}
	c := &conn{
		srv: s, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), out: newOutQueue(),
		log: s.log.With("remote", nc.RemoteAddr().String()), remote: remote,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), started: time.Now(),
		barrierWake: make(chan struct{}, 1),
	}
	c.lastActive.Store(c.started.UnixMilli())
	c.auth = []core.ID{{Scheme: "ip", ID: remote}}
	return c
}

func (c *conn) sessionID() int64 {
	if s := c.session.Load(); s != nil {
		return s.id
	}
	return 0
}

// identities returns the session's identities in ZooKeeper's order.
func (c *conn) identities() []core.ID {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	return javaSetOrder(c.auth)
}

// run serves the connection until it ends; it is the reader goroutine.
func (c *conn) run() {
	go c.writeLoop()
	defer c.shutdown()
	if tc, ok := c.nc.(*tls.Conn); ok && !c.tlsIdentity(tc) {
		return
	}
	if c.fourLetterWord() {
		return
	}
	if !c.handshake() {
		return
	}
	c.ids = c.identities()
	// The replier answers what the reader has queued, also after the
	// reader stops (a client that sends closeSession or half-closes its
	// socket still gets every earlier reply), and stops when the reader
	// closes the queue.
	// The one being answered has left the channel: at most
	// MaxOutstanding requests are read and not yet answered.
	queue := make(chan *request, c.srv.cfg.MaxOutstanding-1)
	replied := make(chan struct{})
	go func() {
		defer close(replied)
		c.replyLoop(queue)
	}()
	c.readLoop(queue)
	<-replied
}

// resetStats is crst for this connection: its packet counters, last
// operation and latencies start again, as ServerCnxn.resetStats does.
func (c *conn) resetStats() {
	c.received.Store(0)
	c.sent.Store(0)
	c.stats.reset()
}

// countReceived counts one frame (or four-letter word) read at now.
func (c *conn) countReceived(now time.Time) {
	c.lastActive.Store(now.UnixMilli())
	c.received.Add(1)
	c.srv.stats.received.Add(1)
}

func (c *conn) logReadError(err error) {
	var fl *jute.FrameLengthError
	switch {
	case errors.As(err, &fl):
		c.log.Warn("closing connection: bad frame length", "err", err)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
	case tlsHandshakeFailed(c.nc):
		// A client without an acceptable certificate, or speaking
		// plaintext to the TLS port: the operator wants to know.
		c.log.Warn("closing connection: TLS handshake failed", "err", err)
	default:
		c.log.Debug("closing connection", "err", err)
	}
}

// tlsHandshakeFailed reports whether nc is a TLS connection whose
// handshake did not complete.
func tlsHandshakeFailed(nc net.Conn) bool {
	tc, ok := nc.(*tls.Conn)
	return ok && !tc.ConnectionState().HandshakeComplete
}

// shutdown ends the connection: the writer sends what is queued, the
// connection's watches go, and only then the socket closes, as ZooKeeper's
// close removes a connection before closing its socket: a client that has
// seen the end of one connection (a four-letter word's, say) never finds it
// still listed by the next.
func (c *conn) shutdown() {
	c.out.finish()
	select {
	case <-c.done:
	case <-time.After(writeTimeout):
	}
	c.srv.watches.removeConn(c)
	c.srv.forget(c)
	c.close()
	<-c.done
}

// close closes the socket at once; the reader, replier and writer then stop.
func (c *conn) close() {
	c.closed.Do(func() {
		c.cancel()
		_ = c.nc.Close()
	})
}

func (c *conn) writeLoop() {
	defer close(c.done)
	for {
		buf, n, last := c.out.take(c.ctx.Done())
		if last {
			return
		}
		err := c.writeBatch(buf, n)
		c.out.written(buf)
		if err != nil {
			c.close()
			return
		}
	}
}

// flushOut writes the frames queued so far on the calling goroutine (the
// replier), sparing the hand-off to the writer goroutine, unless a batch
// is being written already: then its writer sends these after it.
func (c *conn) flushOut() {
	buf, n, ok := c.out.claim()
	if !ok {
		return
	}
	err := c.writeBatch(buf, n)
	c.out.written(buf)
	if err != nil {
		c.close()
	}
}

// writeBatch writes a batch of n frames to the client.
func (c *conn) writeBatch(buf []byte, n int) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(buf); err != nil {
		return err
	}
	c.sent.Add(int64(n))
	c.srv.stats.sent.Add(int64(n))
	return nil
}

// push queues an encoded frame or, if the client is too far behind,
// closes it.
func (c *conn) push(frame []byte) {
	if !c.out.push(frame) {
		c.close()
	}
}

// sendEvent queues a watch notification. Its header is what ZooKeeper
// 3.8's NIOServerCnxn.process and NettyServerCnxn.process send: xid -1
// (NOTIFICATION_XID), zxid -1, err 0, so a client's last seen zxid never
// moves on a notification.
func (c *conn) sendEvent(typ jute.EventType, path string) {
	c.encodeResponse(func(e *jute.Encoder) {
		hdr := jute.ReplyHeader{Xid: jute.XidNotification, Zxid: -1, Err: jute.CodeOk}
		hdr.Encode(e)
		ev := jute.WatcherEvent{Type: typ, State: jute.StateSyncConnected, Path: path}
		ev.Encode(e)
	}, true)
}

// sendReply queues a reply; body, if any, follows the header. Unless
// flush is set it waits in the queue for the replier's next flush, so
// that the replies to requests read together leave in one write.
func (c *conn) sendReply(xid int32, zxid int64, code jute.Code, body jute.Record, flush bool) {
	c.encodeResponse(func(e *jute.Encoder) {
		hdr := jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}
		hdr.Encode(e)
		if body != nil {
			body.Encode(e)
		}
	}, flush)
}

// encodeResponse encodes a reply or notification frame straight into the
// connection's queue and counts its size (without the length prefix) in
// mntr's client response sizes, as ZooKeeper's ServerCnxn.sendResponse
// does. A frame that cannot be encoded, or a client too far behind,
// closes the connection.
func (c *conn) encodeResponse(fn func(e *jute.Encoder), wake bool) {
	size, ok, err := c.out.encode(fn, wake)
	switch {
	case err != nil:
		c.log.Error("encoding reply", "err", err)
		c.close()
	case !ok:
		c.close()
	default:
		c.srv.stats.responses.add(size)
	}
}

// handshake reads the ConnectRequest and opens or re-attaches a session.
func (c *conn) handshake() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.MaxSessionTimeout))
	frame, err := jute.ReadFrame(c.br, c.srv.cfg.MaxBuffer)
	if err != nil {
		c.logReadError(err)
		return false
	}
	c.countReceived(time.Now())
	var req jute.ConnectRequest
	if err := jute.Unmarshal(frame, &req); err != nil {
		c.log.Warn("closing connection: malformed connect request", "err", err)
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.MaxSessionTimeout)
	defer cancel()
	view, err := c.srv.backend.Read(ctx, 0)
	if err != nil {
		c.log.Warn("closing connection: cannot read state", "err", err)
		return false
	}
	lastZxid := view.Rev()
	view.Close()
	if req.LastZxidSeen > lastZxid {
		// The client has seen a newer state than ours; it must try
		// another server rather than go back in time.
		c.log.Info("refusing session: client is ahead", "client_zxid", req.LastZxidSeen, "our_zxid", lastZxid)
		return false
	}
	timeout := c.srv.cfg.negotiateTimeout(req.TimeOut)
	resp := jute.ConnectResponse{ProtocolVersion: jute.ProtocolVersion, TimeOut: timeout, HasReadOnly: req.HasReadOnly}
	// While the ensemble has no leader the handshake waits for one, up to
	// a quarter of the session timeout: below the share of it a client
	// gives one server to answer (Java and kazoo: the timeout divided by
	// the number of servers), so a client that gives up here still has
	// time to try another. Then the connection closes without a reply,
	// as a ZooKeeper server that is not serving closes it.
	hold, cancelHold := context.WithTimeout(ctx, time.Duration(timeout)*time.Millisecond/4)
	defer cancelHold()
	var s *session
	if req.SessionID == 0 {
		s, err = c.createSession(hold, timeout)
		if err != nil {
			c.log.Info("closing connection: cannot create session", "err", err)
			return false
		}
	} else {
		s, err = c.resumeSession(hold, req.SessionID, req.Passwd, timeout)
		switch {
		case errors.Is(err, errSessionExpired):
			// Expired, unknown or wrong password: ZooKeeper answers all
			// three alike (timeout 0, zero password) and closes.
			resp = jute.ConnectResponse{ProtocolVersion: jute.ProtocolVersion, Passwd: make([]byte, 16), HasReadOnly: req.HasReadOnly}
			c.sendConnect(&resp)
			c.log.Info("session re-attach refused: expired", "session", fmt.Sprintf("0x%x", req.SessionID))
			return false
		case err != nil:
			// The session may well be alive; only no leader could say.
			// No reply: the client tries again, here or elsewhere.
			c.log.Info("closing connection: cannot re-attach session now", "session", fmt.Sprintf("0x%x", req.SessionID), "err", err)
			return false
		}
	}
	resp.SessionID, resp.Passwd = s.id, s.password
	c.session.Store(s)
	c.lastKA = time.Now()
	c.nextKA = c.lastKA.Add(s.timeout / 4)
	c.srv.attach(c)
	c.sendConnect(&resp)
	return true
}

// errSessionExpired says a session is gone for good: its lease is not in
// the state the leader has committed, or the password does not match.
var errSessionExpired = errors.New("session expired")

// resumeSession re-attaches session id: it checks the password against
// the session's lease and renews the lease with the leader. It answers
// errSessionExpired only when that is decided (the lease is absent from a
// state at least as new as the leader's commit point, or the leader's
// lessor does not know it); a transient failure (no leader, a leader that
// does not answer) is retried until ctx ends and then returned as is.
func (c *conn) resumeSession(ctx context.Context, id int64, password []byte, timeoutMs int32) (*session, error) {
	var last error
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		lease, err := c.sessionLease(ctx, id)
		if err == nil {
			if lease == nil || lease.Session == nil || string(lease.Session.Password) != string(password) {
				return nil, errSessionExpired
			}
			_, err = c.srv.backend.Leases().KeepAlive(ctx, id)
			if err == nil {
				return &session{id: id, timeout: time.Duration(timeoutMs) * time.Millisecond, password: lease.Session.Password}, nil
			}
			if core.CodeOf(err) == core.CodeLeaseNotFound {
				return nil, errSessionExpired
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a leader: %w", last)
		case <-time.After(wait):
		}
	}
}

// sessionLease reads session id's lease. A member behind the leader may
// not have applied the session's creation yet, so a lease missing here is
// looked up again after catching up with the leader's commit point.
func (c *conn) sessionLease(ctx context.Context, id int64) (*core.Lease, error) {
	for caughtUp := false; ; caughtUp = true {
		view, err := c.srv.backend.Read(ctx, 0)
		if err != nil {
			return nil, err
		}
		lease, err := view.Lease(id)
		view.Close()
		if err != nil || lease != nil || caughtUp {
			return lease, err
		}
		if err := c.srv.backend.Linearize(ctx); err != nil {
			return nil, err
		}
	}
}

func (c *conn) sendConnect(resp *jute.ConnectResponse) {
	e := jute.NewEncoder(nil)
	start := e.BeginFrame()
	resp.Encode(e)
	e.EndFrame(start)
	c.push(e.Bytes())
}

// createSession grants the lease that is the new session. While there is
// no leader (nothing was proposed) it tries again until ctx ends.
func (c *conn) createSession(ctx context.Context, timeoutMs int32) (*session, error) {
	password := make([]byte, 16)
	if _, err := rand.Read(password); err != nil {
		return nil, fmt.Errorf("session password: %w", err)
	}
	id := c.srv.backend.Leases().NewID()
	ttl := translate.LeaseTTL(timeoutMs)
	op := &core.Op{LeaseGrant: &core.LeaseGrant{ID: id, TTL: ttl, Session: &core.Session{TimeoutMs: timeoutMs, Password: password}}, Origin: core.OriginZooKeeper}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		res, err := c.srv.backend.Propose(ctx, op)
		if errors.Is(err, core.ErrNoLeader) {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("propose session 0x%x: %w", id, err)
			case <-time.After(wait):
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("propose session 0x%x: %w", id, err)
		}
		if res.Err != nil {
			return nil, fmt.Errorf("grant session 0x%x: %w", id, res.Err)
		}
		return &session{id: id, timeout: time.Duration(timeoutMs) * time.Millisecond, password: password}, nil
	}
}

// keepAlive renews the session's lease with the leader, on every ping and
// otherwise at most every quarter timeout; now is when the request that
// asks arrived. It returns false when the
// connection must end: the session has expired, or no renewal has reached
// a leader for half the timeout.
//
// A renewal that fails for want of a leader does not end the session: the
// next leader gives every session a full timeout before it expires any.
// The connection keeps serving meanwhile, as a ZooKeeper follower answers
// pings from its own session tracker; if the failures last, it closes
// (without the session-expired reply) so that the client finds a member
// that has a leader, as ZooKeeper servers close their connections when
// they stop following.
func (c *conn) keepAlive(force bool, now time.Time) bool {
	s := c.session.Load()
	if !force && now.Before(c.nextKA) {
		return true
	}
	// A renewal waits for the leader at most a sixth of the timeout, so a
	// ping is answered well within the third of it clients allow.
	ctx, cancel := context.WithTimeout(c.ctx, s.timeout/6)
	_, err := c.srv.backend.Leases().KeepAlive(ctx, s.id)
	cancel()
	switch {
	case err == nil:
		c.lastKA, c.nextKA = now, now.Add(s.timeout/4)
		return true
	case core.CodeOf(err) == core.CodeLeaseNotFound:
		c.log.Info("session expired", "session", fmt.Sprintf("0x%x", s.id))
		return false
	case c.ctx.Err() != nil:
		return false
	case now.Sub(c.lastKA) < s.timeout/2:
		c.nextKA = now.Add(s.timeout / 10)
		c.log.Debug("session renewal failed; will retry", "session", fmt.Sprintf("0x%x", s.id), "err", err)
		return true
	}
	c.log.Info("closing connection: cannot renew the session with a leader", "session", fmt.Sprintf("0x%x", s.id),
		"since", now.Sub(c.lastKA).Round(time.Millisecond), "err", err)
	return false
}
