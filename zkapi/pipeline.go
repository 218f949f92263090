package zkapi

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// A connection pipelines its session's requests. The reader decodes and
// prepares each request in the order it arrives, submits writes to the log
// at once and queues every request on a bounded FIFO; the replier answers
// the FIFO strictly in order. Submitting one write after another from one
// goroutine commits them in that order, so a session may have many writes
// in the same group commit and still see them take effect in the order it
// sent them; a read runs only when it reaches the head, after every earlier
// write of the session has been applied, so it sees them and a watch it
// sets is armed at the revision it read. A read must not see the
// session's later writes either, so the reader submits a write only once
// every earlier request that is not a write has been answered: writes
// pipeline behind writes, reads behind writes, but a write waits for the
// reads before it.
//
// What depends on the request's place in the stream rather than on the
// tree is decided by the reader, as ZooKeeper decides it when the request
// is read: path checks, ACL fix-up with the identities the session has at
// that moment, and addAuth changing them for later requests.

// request is one request on its way through a connection.
type request struct {
	xid   int32
	op    jute.OpCode
	ids   []core.ID // the session's identities when it was read
	start time.Time
	// A write is submitted by the reader; the replier waits for it and
	// turns its result into the reply.
	pending core.Pending
	result  func(*core.Result) reply
	// Anything else is answered when it reaches the head of the FIFO:
	// by answer if set, else by handle(op, rec). Once its reply is
	// queued the replier counts it answered, releasing the reader to
	// submit the next write: not earlier, or that write could fire a
	// watch this request set before the client has the reply that
	// registers the watch on its side.
	answer func() reply
	rec    jute.Record
	// watches says the request arms a watch: the replier answers it
	// and queues its reply with the watch manager locked (see reply).
	watches bool
}

// readLoop reads, prepares and queues requests until the connection ends
// or a request ends it (closeSession, a failed addAuth, an unknown
// opcode). It owns queue and closes it on return.
func (c *conn) readLoop(queue chan<- *request) {
	defer close(queue)
	for {
		s := c.session.Load()
		// A client pings every third of its timeout; silence for a whole
		// timeout means it is gone (its session expires on its own).
		_ = c.nc.SetReadDeadline(time.Now().Add(s.timeout))
		if c.br.Buffered() == 0 {
			c.releaseHeld() // about to wait for the client
		}
		frame, err := jute.ReadFrame(c.br, c.srv.cfg.MaxBuffer)
		if err != nil {
			c.logReadError(err)
			return
		}
		c.readAhead.Store(c.br.Buffered() > 0)
		// One clock reading per request: its arrival, its latency's
		// start, the session renewal's schedule.
		now := time.Now()
		c.countReceived(now)
		req, more := c.prepare(frame, now)
		if req != nil && c.answersInline(req) {
			if !c.reply(req) || !more {
				return
			}
			continue
		}
		if req != nil && req.pending == nil {
			c.readsQueued++
		}
		if req != nil {
			c.srv.stats.outstanding.Add(1)
			c.outstanding.Add(1)
			select {
			case queue <- req:
				if h := c.srv.afterQueue; h != nil {
					h(c)
				}
			case <-c.ctx.Done():
				c.srv.stats.outstanding.Add(-1)
				c.outstanding.Add(-1)
				return
			}
		}
		if !more {
			return
		}
	}
}

// answersInline says the reader may answer req itself, as the replier
// would at once: a plain read (no watch, no wait but for the dispatcher)
// with nothing of the session's still unanswered before it, so its
// reply takes its place in the stream. For a client that pipelines reads
// this is the one goroutine per connection a server needs, without
// handing each request to the replier and waking it: in a getData
// profile the scheduler was 12% of the server's CPU.
func (c *conn) answersInline(req *request) bool {
	if req.pending != nil || req.answer != nil || req.watches {
		return false
	}
	switch req.op {
	case jute.OpGetData, jute.OpExists, jute.OpGetChildren, jute.OpGetChildren2:
	default:
		return false
	}
	// The replier counts a request answered only after its reply is
	// queued, and touches nothing of the connection's after that but the
	// flush, which is safe from either goroutine.
	return c.outstanding.Load() == 0
}

// replyLoop answers queued requests in order until the reader closes the
// queue. After a failure it only drains the queue: the connection is
// closed and no later reply may reach the client.
//
// Replies are flushed to the writer when the queue runs empty and the
// reader has nothing more buffered (it flushes itself before it waits for
// the socket), and before the replier waits for anything but the store (a
// write to commit, the watch dispatcher, a sync), not one by one: the
// replies to the requests a client pipelined, read from the socket
// together, leave together, in one write. Flushing whenever the queue ran
// empty gave a write per reply, since the replier usually answers a read
// before the reader has queued the next one.
func (c *conn) replyLoop(queue <-chan *request) {
	live := true
	for req := range queue {
		if live {
			live = c.reply(req)
		}
		if req.pending == nil {
			c.readsAnswered.Add(1)
			select {
			case c.barrierWake <- struct{}{}:
			default:
			}
		}
		// Counted answered before the reply can reach the client: a
		// client that sends srvr once it has its reply must not find
		// the request still outstanding.
		c.srv.stats.outstanding.Add(-1)
		c.outstanding.Add(-1)
		if live && len(queue) == 0 && !c.readAhead.Load() {
			c.flushOut()
		}
	}
	c.flushOut()
}

// reply answers one request that has reached the head of the FIFO. It
// returns false once no further reply may be sent.
func (c *conn) reply(req *request) bool {
	if req.watches {
		// A client registers a watch when the reply that sets it arrives
		// and drops a notification it has no watch for, so no event may
		// fire the watch before that reply is queued. Holding the watch
		// manager from the read to the queueing keeps the dispatcher,
		// which queues notifications under it, out of that window; the
		// read is then at the revision dispatched (see view), so every
		// notification its reply reflects is queued already.
		// The dispatcher may lag the store: first let it reach every
		// revision applied by now, so that the read still shows every
		// write acknowledged before this request, to a client of either
		// face.
		c.flushOut()
		if err := c.awaitDispatchOfLatest(); err != nil {
			c.close()
			return false
		}
		w := c.srv.watches
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	var r reply
	if req.pending != nil {
		// The replies queued so far must not wait for this write. If
		// its result is in already (one group committed both), they
		// leave with its reply instead, in one write to the socket:
		// a write syscall per reply was the largest single cost of a
		// ZooKeeper create or setData.
		if !req.pending.Answered() {
			c.flushOut()
		}
		res, err := req.pending.Wait(c.ctx)
		switch {
		case err != nil:
			r = reply{fail: fmt.Errorf("%w: %w", errBackend, err)}
		case res.Err != nil && !isRefusal(res.Err):
			r = reply{fail: fmt.Errorf("%w: %w", errBackend, res.Err)}
		default:
			r = req.result(res)
		}
	} else if req.answer != nil {
		r = req.answer()
	} else {
		if req.op == jute.OpSync {
			c.flushOut() // sync waits for the leader
		}
		r = c.handle(req.op, req.rec, req.ids)
	}
	if c.log.Enabled(c.ctx, slog.LevelDebug) {
		c.log.Debug("request", "xid", req.xid, "op", req.op, "err", r.code, "zxid", r.zxid)
	}
	if r.fail != nil {
		// Later writes of the session may commit without this one (a
		// leader change drops what it had not committed): the client
		// must see the connection lost, not a later reply.
		if c.ctx.Err() == nil {
			c.log.Warn("closing connection: request failed", "op", req.op, "err", r.fail)
		}
		c.close()
		return false
	}
	if r.wait && !req.watches {
		if c.srv.watches.Dispatched() < r.zxid {
			c.flushOut()
		}
		if err := c.srv.watches.waitDispatched(c.ctx, r.zxid); err != nil {
			c.close()
			return false
		}
	}
	xid := req.xid
	if req.op == jute.OpPing {
		// FinalRequestProcessor answers every ping with PING_XID, whatever
		// xid the request carried.
		xid = jute.XidPing
	}
	body := r.body
	if r.code != jute.CodeOk && !r.bodyOnError {
		body = nil // an error reply is the header alone
	}
	c.sendReply(xid, r.zxid, r.code, body, r.close)
	now := time.Now()
	c.record(req.op, req.xid, r.zxid, now.Sub(req.start), now)
	if req.op == jute.OpAuth && r.code == jute.CodeAuthFailed {
		c.srv.stats.authFailed.Add(1)
	}
	return !r.close
}

// releaseHeld is the reader's, before anything that may wait (the socket,
// a submit): the replier stops holding replies back for a request it
// expects from the reader's buffer, and what it held so far goes out. The
// order matters: a replier that read readAhead before the store had
// queued its reply before that, so the flush after the store sends it.
func (c *conn) releaseHeld() {
	c.readAhead.Store(false)
	c.flushOut()
}

// submit submits a write for req; result turns its outcome into the
// reply. A failure to submit closes the connection at once: the session's
// later writes must not commit without this one.
func (c *conn) submit(req *request, op *core.Op, result func(*core.Result) reply) bool {
	c.releaseHeld() // submitting can wait, for a leader or room in the log
	for c.readsAnswered.Load() < c.readsQueued {
		select {
		case <-c.barrierWake:
		case <-c.ctx.Done():
			return false
		}
	}
	op.Origin = core.OriginZooKeeper
	p, err := c.srv.backend.Submit(c.ctx, op)
	if isRefusal(err) {
		// Refused before it was logged (too large for the log).
		c.log.Info("request refused", "op", req.op, "err", err)
		req.answer = c.refusal(codeOf(err))
		return true
	}
	if err != nil {
		if c.ctx.Err() == nil {
			c.log.Warn("closing connection: request failed", "op", req.op, "err", fmt.Errorf("%w: %w", errBackend, err))
		}
		c.close()
		return false
	}
	req.pending, req.result = p, result
	return true
}

// submitTxn submits a Txn of ZooKeeper ops with req's identities.
func (c *conn) submitTxn(req *request, ops []core.TxnOp, result func(*core.Result) reply) bool {
	return c.submit(req, &core.Op{Txn: &core.Txn{Success: ops, Auth: req.ids}}, result)
}

// refusal answers at the head of the FIFO with an error decided when the
// request was read.
func (c *conn) refusal(code jute.Code) func() reply {
	return func() reply { return errReply(c.srv.watches.Dispatched(), code) }
}

// awaitDispatchOfLatest waits until the watch dispatcher has queued the
// notifications of every revision the member had applied when it was
// called. A member that cannot be read (corrupt, closing) is not waited
// for: the read that follows fails and says why.
func (c *conn) awaitDispatchOfLatest() error {
	rev, err := c.srv.backend.Rev()
	if err != nil {
		return nil
	}
	return c.srv.watches.waitDispatched(c.ctx, rev)
}
