package zkapi

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// reply is the answer to one request.
type reply struct {
	zxid int64
	code jute.Code
	body jute.Record
	// wait says the reply reflects state at zxid, so notifications up to
	// it must be queued first.
	wait bool
	// close ends the connection once the reply is sent.
	close bool
	// fail means the member could not answer: the connection is dropped.
	fail error
	// bodyOnError sends body with an error code too (the body is
	// otherwise sent only with Ok).
	bodyOnError bool
}

func errReply(zxid int64, code jute.Code) reply { return reply{zxid: zxid, code: code} }

// prepare decodes one request, read at now, and does, in the reader,
// everything that depends on its place in the stream: validation, ACL
// fix-up, addAuth, and submitting a write. It returns the request to queue (nil: none) and
// whether to go on reading.
func (c *conn) prepare(frame []byte, now time.Time) (*request, bool) {
	d := &c.dec
	d.Reset(frame)
	d.SetMaxLength(c.srv.cfg.MaxBuffer)
	var hdr jute.RequestHeader
	hdr.Decode(d)
	if d.Err() != nil {
		c.log.Warn("closing connection: malformed request header", "err", d.Err())
		return nil, false
	}
	req := &request{xid: hdr.Xid, op: hdr.Type, ids: c.ids, start: now}
	// Before anything else, as ZooKeeper's processPacket checks it.
	if hdr.Type != jute.OpAuth && hdr.Type != jute.OpSASL && c.authEnforced() {
		c.log.Info("closing connection: the session has not authenticated with a required scheme",
			"schemes", c.srv.cfg.EnforceAuthSchemes, "op", hdr.Type)
		req.answer = func() reply { return reply{code: jute.CodeSessionClosedRequireSaslAuth, close: true} }
		return req, false
	}
	rec, known := jute.NewRequest(hdr.Type)
	if !known || hdr.Type == jute.OpCreateSession {
		// ZooKeeper answers an unknown opcode with Unimplemented and
		// drops the connection.
		c.log.Warn("closing connection: unknown opcode", "op", int32(hdr.Type))
		req.answer = func() reply { return reply{zxid: -1, code: jute.CodeUnimplemented, close: true} }
		return req, false
	}
	if rec != nil {
		rec.Decode(d)
		if d.Err() != nil {
			c.log.Info("malformed request", "op", hdr.Type, "err", d.Err())
			req.answer = c.refusal(jute.CodeMarshallingError)
			return req, true
		}
	}
	if !c.keepAlive(hdr.Type == jute.OpPing, now) {
		return nil, false
	}
	switch op := hdr.Type; op {
	case jute.OpCloseSession:
		if !c.closeSession(req) {
			return nil, false
		}
		return req, false
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL,
		jute.OpDelete, jute.OpSetData, jute.OpSetACL, jute.OpCheck:
		if !c.write(req, rec) {
			return nil, false
		}
	case jute.OpMulti:
		if !c.multi(req, rec.(*jute.MultiRequest)) {
			return nil, false
		}
	case jute.OpAuth:
		r := c.addAuth(rec.(*jute.AuthPacket))
		req.answer = func() reply { return r }
		return req, !r.close
	case jute.OpSASL:
		r := c.sasl(rec.(*jute.GetSASLRequest))
		req.answer = func() reply { return r }
		return req, !r.close
	default:
		req.rec = rec
		req.watches = armsWatch(rec)
	}
	return req, true
}

// armsWatch reports whether a read request sets a watch; handle then
// runs with the watch manager locked.
func armsWatch(rec jute.Record) bool {
	switch r := rec.(type) {
	case *jute.ExistsRequest:
		return r.Watch
	case *jute.GetDataRequest:
		return r.Watch
	case *jute.GetChildrenRequest:
		return r.Watch
	case *jute.GetChildren2Request:
		return r.Watch
	case *jute.SetWatches, *jute.SetWatches2, *jute.AddWatchRequest:
		return true
	}
	return false
}

// handle answers a request that is not a write, when it reaches the head
// of the FIFO: every earlier request of the session has been answered.
func (c *conn) handle(op jute.OpCode, rec jute.Record, ids []core.ID) reply {
	switch op {
	case jute.OpPing:
		return reply{zxid: c.srv.watches.Dispatched()}
	case jute.OpMultiRead:
		return c.multiRead(rec.(*jute.MultiRequest), ids)
	case jute.OpExists:
		r := rec.(*jute.ExistsRequest)
		return c.exists(r.Path, r.Watch, ids)
	case jute.OpGetData:
		r := rec.(*jute.GetDataRequest)
		return c.getData(r.Path, r.Watch, ids)
	case jute.OpGetChildren:
		r := rec.(*jute.GetChildrenRequest)
		return c.getChildren(r.Path, r.Watch, false, ids)
	case jute.OpGetChildren2:
		r := rec.(*jute.GetChildren2Request)
		return c.getChildren(r.Path, r.Watch, true, ids)
	case jute.OpGetACL:
		return c.getACL(rec.(*jute.GetACLRequest).Path, ids)
	case jute.OpGetAllChildrenNumber:
		return c.getAllChildrenNumber(rec.(*jute.GetAllChildrenNumberRequest).Path, ids)
	case jute.OpGetEphemerals:
		return c.getEphemerals(rec.(*jute.GetEphemeralsRequest).PrefixPath)
	case jute.OpSync:
		return c.sync(rec.(*jute.SyncRequest).Path)
	case jute.OpSetWatches:
		r := rec.(*jute.SetWatches)
		return c.setWatches(&jute.SetWatches2{RelativeZxid: r.RelativeZxid, DataWatches: r.DataWatches,
			ExistWatches: r.ExistWatches, ChildWatches: r.ChildWatches})
	case jute.OpSetWatches2:
		return c.setWatches(rec.(*jute.SetWatches2))
	case jute.OpAddWatch:
		return c.addWatch(rec.(*jute.AddWatchRequest))
	case jute.OpRemoveWatches:
		r := rec.(*jute.RemoveWatchesRequest)
		return c.removeWatches(r.Path, r.Type, true)
	case jute.OpCheckWatches:
		r := rec.(*jute.CheckWatchesRequest)
		return c.removeWatches(r.Path, r.Type, false)
	case jute.OpWhoAmI:
		return c.whoAmI(ids)
	case jute.OpReconfig:
		return c.reconfig(rec.(*jute.ReconfigRequest), ids)
	}
	// Known but unsupported requests.
	return errReply(c.srv.watches.Dispatched(), jute.CodeUnimplemented)
}

// closeSession submits the revoke of the session's lease; the reply ends
// the connection.
func (c *conn) closeSession(req *request) bool {
	s := c.session.Load()
	return c.submit(req, &core.Op{LeaseRevoke: &core.LeaseRevoke{ID: s.id}}, func(res *core.Result) reply {
		c.log.Debug("session closed", "session", fmt.Sprintf("0x%x", s.id))
		return reply{zxid: res.Rev, wait: true, close: true}
	})
}

// toStat converts a node and its Dir to the wire Stat.
func toStat(n *core.Node, d *core.Dir) jute.Stat {
	s := core.StatOf(n, d)
	return jute.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
		Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: s.EphemeralOwner,
		DataLength: s.DataLength, NumChildren: s.NumChildren, Pzxid: s.Pzxid,
	}
}

// maxTTL is the largest TTL ZooKeeper's EphemeralType.TTL can encode.
const maxTTL = 1<<40 - 1

// specialPath reports the paths ZooKeeper refuses to delete.
func specialPath(p string) bool {
	return p == "/" || p == "/zookeeper" || p == "/zookeeper/quota" || p == "/zookeeper/config"
}

// prepareWrite validates a write request as ZooKeeper's PrepRequestProcessor
// does before it touches the tree, and translates it into a core op. An op
// Janus could not store (a path over core.MaxKeyBytes, which ZooKeeper
// itself would take) gets BadArguments, ZooKeeper's answer to a bad path.
func (c *conn) prepareWrite(op jute.OpCode, rec jute.Record, ids []core.ID) (core.TxnOp, jute.Code) {
	top, code := c.translateWrite(op, rec, ids)
	if code == jute.CodeOk {
		if err := core.CheckOp(&core.Op{Txn: &core.Txn{Success: []core.TxnOp{top}}}); err != nil {
			c.log.Info("refusing write over a storage limit", "op", op, "err", err)
			return core.TxnOp{}, codeOf(err)
		}
		if code := c.checkQuota(top); code != jute.CodeOk {
			return core.TxnOp{}, code
		}
	}
	return top, code
}

// translateWrite does prepareWrite's checks that ZooKeeper does too.
func (c *conn) translateWrite(op jute.OpCode, rec jute.Record, ids []core.ID) (core.TxnOp, jute.Code) {
	switch r := rec.(type) {
	case *jute.CreateRequest:
		return c.prepareCreate(op, r.Path, r.Data, r.ACL, r.Flags, -1, ids)
	case *jute.CreateTTLRequest:
		return c.prepareCreate(op, r.Path, r.Data, r.ACL, r.Flags, r.TTL, ids)
	case *jute.DeleteRequest:
		// ZooKeeper checks only for a slash and NUL here; a path that is
		// otherwise invalid simply names no node.
		if !strings.Contains(r.Path, "/") || strings.IndexByte(r.Path, 0) >= 0 || specialPath(r.Path) {
			return core.TxnOp{}, jute.CodeBadArguments
		}
		return core.TxnOp{Kind: core.OpDelete, Key: []byte(r.Path), ExpectedVersion: r.Version}, jute.CodeOk
	case *jute.SetDataRequest:
		if !core.IsTreePath([]byte(r.Path)) {
			return core.TxnOp{}, jute.CodeBadArguments
		}
		return core.TxnOp{Kind: core.OpSetData, Key: []byte(r.Path), Value: r.Data, ExpectedVersion: r.Version}, jute.CodeOk
	case *jute.CheckVersionRequest:
		if !core.IsTreePath([]byte(r.Path)) {
			return core.TxnOp{}, jute.CodeBadArguments
		}
		return core.TxnOp{Kind: core.OpCheck, Key: []byte(r.Path), ExpectedVersion: r.Version}, jute.CodeOk
	case *jute.SetACLRequest:
		if !core.IsTreePath([]byte(r.Path)) {
			return core.TxnOp{}, jute.CodeBadArguments
		}
		acl, ok := fixupACL(r.ACL, ids)
		if !ok {
			return core.TxnOp{}, jute.CodeInvalidACL
		}
		return core.TxnOp{Kind: core.OpSetACL, Key: []byte(r.Path), ACL: acl, ExpectedVersion: r.Version}, jute.CodeOk
	}
	return core.TxnOp{}, jute.CodeMarshallingError
}

func (c *conn) prepareCreate(op jute.OpCode, path string, data []byte, acl []jute.ACL, flags jute.CreateMode, ttl int64, ids []core.ID) (core.TxnOp, jute.Code) {
	if !flags.Valid() {
		return core.TxnOp{}, jute.CodeBadArguments
	}
	if flags.TTL() && c.srv.cfg.DisableExtendedTypes {
		return core.TxnOp{}, jute.CodeUnimplemented
	}
	if flags.TTL() {
		if ttl <= 0 || ttl > maxTTL {
			return core.TxnOp{}, jute.CodeBadArguments
		}
	} else if ttl >= 0 {
		return core.TxnOp{}, jute.CodeBadArguments
	}
	if !strings.Contains(path, "/") || strings.IndexByte(path, 0) >= 0 {
		return core.TxnOp{}, jute.CodeBadArguments
	}
	full := path
	if flags.Sequential() {
		full += "0000000000"
	}
	if !core.IsTreePath([]byte(full)) {
		return core.TxnOp{}, jute.CodeBadArguments
	}
	cacl, ok := fixupACL(acl, ids)
	if !ok {
		return core.TxnOp{}, jute.CodeInvalidACL
	}
	opts := &core.CreateOptions{Sequential: flags.Sequential(), ACL: cacl}
	switch {
	case flags.Ephemeral():
		opts.Lease = c.sessionID()
	case flags.Container():
		opts.Mode = core.ModeContainer
	case flags.TTL():
		opts.Mode, opts.TTL = core.ModeTTL, ttl
	}
	return core.TxnOp{Kind: core.OpCreate, Key: []byte(path), Value: data, Create: opts}, jute.CodeOk
}

// write prepares and submits a single write.
func (c *conn) write(req *request, rec jute.Record) bool {
	op := req.op
	top, code := c.prepareWrite(op, rec, req.ids)
	if code != jute.CodeOk {
		req.answer = c.refusal(code)
		return true
	}
	return c.submitTxn(req, []core.TxnOp{top}, func(res *core.Result) reply { return writeReply(op, res) })
}

// writeReply is a single write's answer.
func writeReply(op jute.OpCode, res *core.Result) reply {
	if res.Err != nil {
		return reply{zxid: res.Rev, code: codeOf(res.Err), wait: true}
	}
	r := res.Ops[0]
	out := reply{zxid: res.Rev, wait: true}
	switch op {
	case jute.OpCreate:
		out.body = &jute.CreateResponse{Path: string(r.Path)}
	case jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		out.body = &jute.Create2Response{Path: string(r.Path), Stat: toStat(r.Node, r.Dir)}
	case jute.OpSetData, jute.OpCheck:
		out.body = &jute.SetDataResponse{Stat: toStat(r.Node, r.Dir)}
	case jute.OpSetACL:
		out.body = &jute.SetACLResponse{Stat: toStat(r.Node, r.Dir)}
	}
	return out
}

// multi prepares and submits write ops all or nothing. An op that fails
// validation here must still let the ops before it report their own
// failures, as they would in ZooKeeper's in-order preparation: they are
// submitted with a trailing op that always fails, so nothing is written
// either way.
func (c *conn) multi(req *request, mr *jute.MultiRequest) bool {
	n := len(mr.Ops)
	ops := make([]core.TxnOp, 0, n+1)
	failAt, failCode := -1, jute.CodeOk
	for i, op := range mr.Ops {
		if op.Type == jute.OpGetData || op.Type == jute.OpGetChildren {
			req.answer = c.refusal(jute.CodeMarshallingError)
			return true
		}
		typ, rec := multiCreateOp(op)
		mr.Ops[i] = jute.MultiOp{Type: typ, Request: rec}
		top, code := c.prepareWrite(typ, rec, req.ids)
		if code != jute.CodeOk {
			failAt, failCode = i, code
			break
		}
		ops = append(ops, top)
	}
	if failAt >= 0 {
		ops = append(ops, core.TxnOp{Kind: core.OpCreate, Key: nil}) // refused: not a tree path
	}
	if len(ops) == 0 || failAt == 0 {
		resp := &jute.MultiResponse{Results: make([]jute.MultiResult, 0, n)}
		if failAt == 0 {
			resp.Results = failedResults(n, 0, failCode)
		}
		req.answer = func() reply { return reply{zxid: c.srv.watches.Dispatched(), body: resp} }
		return true
	}
	return c.submitTxn(req, ops, func(res *core.Result) reply { return multiReply(mr, res, failAt, failCode) })
}

// multiReply is a multi's answer.
func multiReply(req *jute.MultiRequest, res *core.Result, failAt int, failCode jute.Code) reply {
	n := len(req.Ops)
	resp := &jute.MultiResponse{}
	if res.Err != nil {
		code := codeOf(res.Err)
		if res.FailedOp == failAt {
			code = failCode
		}
		resp.Results = failedResults(n, res.FailedOp, code)
		return reply{zxid: res.Rev, body: resp, wait: true}
	}
	resp.Results = make([]jute.MultiResult, n)
	for i, op := range req.Ops {
		r := res.Ops[i]
		switch op.Type {
		case jute.OpCreate:
			resp.Results[i] = jute.MultiResult{Type: jute.OpCreate, Path: string(r.Path)}
		case jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
			resp.Results[i] = jute.MultiResult{Type: jute.OpCreate2, Path: string(r.Path), Stat: toStat(r.Node, r.Dir)}
		case jute.OpDelete:
			resp.Results[i] = jute.MultiResult{Type: jute.OpDelete}
		case jute.OpSetData:
			resp.Results[i] = jute.MultiResult{Type: jute.OpSetData, Stat: toStat(r.Node, r.Dir)}
		case jute.OpCheck:
			resp.Results[i] = jute.MultiResult{Type: jute.OpCheck}
		}
	}
	return reply{zxid: res.Rev, body: resp, wait: true}
}

// multiCreateOp returns the op a multi's create really is. ZooKeeper's
// MultiOperationRecord rebuilds every create with Op.create, which picks the
// opcode from the flags alone: create2 becomes create (a result without a
// Stat), a TTL mode becomes createTTL, CONTAINER becomes createContainer,
// and a createTTL whose flags are not a TTL mode drops its TTL and becomes a
// plain create. (A TTL mode sent in a CreateRequest stays as sent: ZooKeeper
// then fails the whole request.)
func multiCreateOp(op jute.MultiOp) (jute.OpCode, jute.Record) {
	switch r := op.Request.(type) {
	case *jute.CreateRequest:
		if r.Flags.TTL() {
			return op.Type, r
		}
		if r.Flags.Container() {
			return jute.OpCreateContainer, r
		}
		return jute.OpCreate, r
	case *jute.CreateTTLRequest:
		if r.Flags.TTL() {
			return jute.OpCreateTTL, r
		}
		typ := jute.OpCreate
		if r.Flags.Container() {
			typ = jute.OpCreateContainer
		}
		return typ, &jute.CreateRequest{Path: r.Path, Data: r.Data, ACL: r.ACL, Flags: r.Flags}
	}
	return op.Type, op.Request
}

// failedResults is a failed multi's answer: ok before the failed op, its
// code, then RuntimeInconsistency.
func failedResults(n, failed int, code jute.Code) []jute.MultiResult {
	out := make([]jute.MultiResult, n)
	for i := range out {
		c := jute.CodeOk
		switch {
		case i == failed:
			c = code
		case i > failed:
			c = jute.CodeRuntimeInconsistency
		}
		out[i] = jute.MultiResult{Type: jute.OpError, Err: c}
	}
	return out
}

// view runs fn on a view of the latest state. With watch set the caller
// holds the watch manager (see reply) and the view is at the revision
// dispatched, which the store has always published: a watch fn registers
// misses no event after the view's revision and fires for none before
// it, and the notifications of every event the view shows are queued.
// (A view at that revision is missing only if an etcd client compacted
// past what the dispatcher has reached; the read fails and the connection
// closes, which every client recovers from.)
func (c *conn) view(watch bool, fn func(v core.ReadView) reply) reply {
	var rev int64 // latest
	if watch {
		rev = c.srv.watches.dispatched.Load()
	}
	v, err := c.srv.backend.Read(c.ctx, rev)
	if err != nil {
		return reply{fail: fmt.Errorf("%w: read: %w", errBackend, err)}
	}
	defer v.Close()
	r := fn(v)
	r.zxid, r.wait = v.Rev(), true
	return r
}

// lookup returns the node ZooKeeper sees at path, or nil.
func lookup(v core.View, path string) (*core.Node, *core.Dir, error) {
	key := []byte(path)
	if !core.IsTreePath(key) {
		return nil, nil, nil
	}
	return core.TreeNode(v, key)
}

// exists answers as ZooKeeper's, which checks no ACL, except on a key an
// etcd role covers: there, as etcd refuses a count_only Range of a key
// the user may not read, a session without the etcd right gets NoAuth
// (and no watch), whether or not the znode exists.
func (c *conn) exists(path string, watch bool, ids []core.ID) reply {
	return c.view(watch, func(v core.ReadView) reply {
		if !c.srv.backend.Auth().ZKPermitted([]byte(path), core.PermRead, ids) {
			return reply{code: jute.CodeNoAuth}
		}
		n, d, err := lookup(v, path)
		if err != nil {
			return reply{fail: err}
		}
		var stat jute.Stat
		if n != nil {
			stat = toStat(n, d)
			if path == configPath {
				if _, stat, err = c.configNode(n, watch); err != nil {
					return reply{fail: err}
				}
			}
		}
		if watch && core.IsTreePath([]byte(path)) {
			// Watches a missing node for its creation, an existing one
			// for its change or deletion: both are data watches.
			c.srv.watches.addLocked(&c.srv.watches.data, path, c, watchEntry{armedAt: v.Rev()})
		}
		if n == nil {
			return reply{code: jute.CodeNoNode}
		}
		return reply{body: &jute.ExistsResponse{Stat: stat}}
	})
}

// readTarget finds the node a read names and checks that ids may do perm
// on it, by core's rule for a ZooKeeper request's target (core.ZKTarget),
// which writes meet in Apply. A string that is not a tree path names no
// znode. When ok is false, refused is the reply to send (NoNode, NoAuth
// or a failed read).
func readTarget(v core.View, st *core.AuthState, path string, perm core.Perm, ids []core.ID) (n *core.Node, d *core.Dir, refused reply, ok bool) {
	key := []byte(path) // once: a path longer than 32 bytes is an allocation
	if !core.IsTreePath(key) {
		return nil, nil, reply{code: jute.CodeNoNode}, false
	}
	n, d, err := core.ZKTarget(v, st, key, perm, ids)
	switch {
	case core.IsRefusal(err):
		return nil, nil, reply{code: codeOf(err)}, false
	case err != nil:
		return nil, nil, reply{fail: err}, false
	}
	return n, d, reply{}, true
}

func (c *conn) getData(path string, watch bool, ids []core.ID) reply {
	return c.view(watch, func(v core.ReadView) reply {
		n, d, refused, ok := readTarget(v, c.srv.backend.Auth(), path, core.PermRead, ids)
		if !ok {
			return refused
		}
		stat := toStat(n, d)
		if path == configPath {
			var err error
			if n, stat, err = c.configNode(n, watch); err != nil {
				return reply{fail: err}
			}
		}
		if watch {
			c.srv.watches.addLocked(&c.srv.watches.data, path, c, watchEntry{armedAt: v.Rev()})
		}
		return reply{body: &jute.GetDataResponse{Data: n.Value, Stat: stat}}
	})
}

// errHidden is children's and countDescendants' refusal: the answer would
// reveal a znode that etcd's role permissions hide from the caller.
var errHidden = errors.New("a child is hidden by etcd role permissions")

// etcdReadable says which keys ids may learn of under st's etcd role
// permissions (all of them with etcd auth off): a key a role covers only
// with the etcd right to read it.
func etcdReadable(st *core.AuthState, ids []core.ID) func(key []byte) bool {
	return func(key []byte) bool { return st.ZKPermitted(key, core.PermRead, ids) }
}

// children lists the names under path. A listing that would name a key
// readable refuses is refused whole (errHidden), as etcd refuses a
// keys_only Range for one unreadable key; ZooKeeper's own rule (READ on
// the parent) is the caller's to check.
func children(v core.View, path string, readable func(key []byte) bool) ([]string, error) {
	out := []string{}
	hidden := false
	err := core.TreeChildren(v, []byte(path), func(name []byte) bool {
		if !readable(core.JoinPath([]byte(path), name)) {
			hidden = true
			return false
		}
		out = append(out, string(name))
		return true
	})
	if err == nil && hidden {
		err = errHidden
	}
	return out, err
}

// hiddenOr turns errHidden into NoAuth and any other error into a failed
// read.
func hiddenOr(err error) reply {
	if errors.Is(err, errHidden) {
		return reply{code: jute.CodeNoAuth}
	}
	return reply{fail: err}
}

func (c *conn) getChildren(path string, watch, withStat bool, ids []core.ID) reply {
	return c.view(watch, func(v core.ReadView) reply {
		n, d, refused, ok := readTarget(v, c.srv.backend.Auth(), path, core.PermRead, ids)
		if !ok {
			return refused
		}
		kids, err := children(v, path, etcdReadable(c.srv.backend.Auth(), ids))
		if err != nil {
			return hiddenOr(err)
		}
		if watch {
			c.srv.watches.addLocked(&c.srv.watches.child, path, c, watchEntry{armedAt: v.Rev()})
		}
		if withStat {
			return reply{body: &jute.GetChildren2Response{Children: kids, Stat: toStat(n, d)}}
		}
		return reply{body: &jute.GetChildrenResponse{Children: kids}}
	})
}

func (c *conn) getACL(path string, ids []core.ID) reply {
	return c.view(false, func(v core.ReadView) reply {
		n, d, refused, ok := readTarget(v, c.srv.backend.Auth(), path, core.PermRead|core.PermAdmin, ids)
		if !ok {
			return refused
		}
		acl := toJuteACL(n.ACL)
		if !core.CheckACL(n.ACL, core.PermAdmin, ids) {
			acl = redactDigests(acl)
		}
		stat := toStat(n, d)
		if path == configPath {
			var err error
			if _, stat, err = c.configNode(n, false); err != nil {
				return reply{fail: err}
			}
		}
		return reply{body: &jute.GetACLResponse{ACL: acl, Stat: stat}}
	})
}

func (c *conn) getAllChildrenNumber(path string, ids []core.ID) reply {
	return c.view(false, func(v core.ReadView) reply {
		st := c.srv.backend.Auth()
		_, _, refused, ok := readTarget(v, st, path, core.PermRead, ids)
		if !ok {
			return refused
		}
		total, err := countDescendants(v, []byte(path), etcdReadable(st, ids))
		if err != nil {
			return hiddenOr(err)
		}
		return reply{body: &jute.GetAllChildrenNumberResponse{TotalNumber: int32(total)}}
	})
}

// countDescendants counts the znodes below path. A count that would
// include a key readable refuses is refused whole (errHidden), as etcd
// refuses a count_only Range for one unreadable key.
func countDescendants(v core.View, path []byte, readable func(key []byte) bool) (int, error) {
	var kids [][]byte
	hidden := false
	if err := core.TreeChildren(v, path, func(name []byte) bool {
		k := core.JoinPath(path, name)
		if !readable(k) {
			hidden = true
			return false
		}
		kids = append(kids, k)
		return true
	}); err != nil {
		return 0, err
	}
	if hidden {
		return 0, errHidden
	}
	total := len(kids)
	for _, k := range kids {
		n, err := countDescendants(v, k, readable)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (c *conn) getEphemerals(prefix string) reply {
	id := c.sessionID()
	all := strings.TrimSpace(prefix) == "" || strings.TrimSpace(prefix) == "/"
	return c.view(false, func(v core.ReadView) reply {
		out := []string{}
		err := v.LeaseKeys(id, func(key []byte) bool {
			if core.IsTreePath(key) && (all || bytes.HasPrefix(key, []byte(prefix))) {
				out = append(out, string(key))
			}
			return true
		})
		if err != nil {
			return reply{fail: err}
		}
		return reply{body: &jute.GetEphemeralsResponse{Ephemerals: out}}
	})
}

func (c *conn) sync(path string) reply {
	if err := c.srv.backend.Linearize(c.ctx); err != nil {
		return reply{fail: fmt.Errorf("%w: sync: %w", errBackend, err)}
	}
	return c.view(false, func(core.ReadView) reply {
		return reply{body: &jute.SyncResponse{Path: path}}
	})
}

// multiRead runs read ops on one view; unlike multi it is not all or
// nothing: a failed read is an error result and the others succeed.
func (c *conn) multiRead(req *jute.MultiRequest, ids []core.ID) reply {
	return c.view(false, func(v core.ReadView) reply {
		resp := &jute.MultiResponse{Results: make([]jute.MultiResult, len(req.Ops))}
		for i, op := range req.Ops {
			var path string
			switch r := op.Request.(type) {
			case *jute.GetDataRequest:
				path = r.Path
			case *jute.GetChildrenRequest:
				path = r.Path
			default:
				return reply{code: jute.CodeMarshallingError}
			}
			n, d, refused, ok := readTarget(v, c.srv.backend.Auth(), path, core.PermRead, ids)
			switch {
			case !ok && refused.fail != nil:
				return refused
			case !ok:
				resp.Results[i] = jute.MultiResult{Type: jute.OpError, Err: refused.code}
			case op.Type == jute.OpGetData:
				resp.Results[i] = jute.MultiResult{Type: jute.OpGetData, Data: n.Value, Stat: toStat(n, d)}
			default:
				kids, err := children(v, path, etcdReadable(c.srv.backend.Auth(), ids))
				switch {
				case errors.Is(err, errHidden):
					resp.Results[i] = jute.MultiResult{Type: jute.OpError, Err: jute.CodeNoAuth}
					continue
				case err != nil:
					return reply{fail: err}
				}
				resp.Results[i] = jute.MultiResult{Type: jute.OpGetChildren, Children: kids}
			}
		}
		return reply{body: resp}
	})
}

// addAuth adds an identity. An unknown scheme or a malformed credential
// gets AuthFailed and the connection closes, as in ZooKeeper.
func (c *conn) addAuth(p *jute.AuthPacket) reply {
	var id core.ID
	switch p.Scheme {
	case "digest":
		d, ok := digestID(string(p.Auth))
		if !ok {
			return reply{code: jute.CodeAuthFailed, close: true}
		}
		id = core.ID{Scheme: "digest", ID: d}
		if super := c.srv.cfg.SuperDigest; super != "" && d == super {
			// ZooKeeper adds super before the digest identity.
			c.log.Info("super user authenticated by digest", "user", userName(id))
			c.addIdentities(core.ID{Scheme: "super", ID: ""})
		}
	case "ip":
		id = core.ID{Scheme: "ip", ID: c.remote}
	case "x509":
		// The identity comes from the TLS handshake; asking for it again
		// succeeds only on a connection that has it.
		if !c.hasScheme("x509") {
			c.log.Info("closing connection: x509 authentication without a client certificate")
			return reply{code: jute.CodeAuthFailed, close: true}
		}
		return reply{}
	case core.EtcdScheme:
		// An etcd user, with its etcd password: the session then acts
		// as etcd:<user> in ACLs, as that user's etcd requests do.
		user, ok := c.srv.etcdUser(string(p.Auth))
		if !ok {
			c.log.Info("closing connection: etcd authentication failed", "user", user)
			return reply{code: jute.CodeAuthFailed, close: true}
		}
		id = core.ID{Scheme: core.EtcdScheme, ID: user}
	default:
		c.log.Info("closing connection: unknown auth scheme", "scheme", p.Scheme)
		return reply{code: jute.CodeAuthFailed, close: true}
	}
	c.addIdentities(id)
	return reply{}
}

// hasScheme reports whether the session holds an identity of scheme.
// Only the reader calls it.
func (c *conn) hasScheme(scheme string) bool {
	return slices.ContainsFunc(c.ids, func(id core.ID) bool { return id.Scheme == scheme })
}

func (c *conn) whoAmI(ids []core.ID) reply {
	infos := make([]jute.ClientInfo, len(ids))
	for i, id := range ids {
		infos[i] = jute.ClientInfo{AuthScheme: id.Scheme, User: userName(id)}
	}
	return reply{zxid: c.srv.watches.Dispatched(), body: &jute.WhoAmIResponse{ClientInfo: infos}}
}

// setWatches re-registers a reconnecting client's watches. Watches whose
// node changed after the client's last zxid fire at once; the rest are
// armed, as ZooKeeper's DataTree.setWatches does.
func (c *conn) setWatches(req *jute.SetWatches2) reply {
	rel := req.RelativeZxid
	wm := c.srv.watches
	return c.view(true, func(v core.ReadView) reply {
		armed := watchEntry{armedAt: v.Rev()}
		for _, p := range req.DataWatches {
			n, _, err := lookup(v, p)
			if err != nil {
				return reply{fail: err}
			}
			switch {
			case n == nil:
				c.sendEvent(jute.EventNodeDeleted, p)
			case n.ModRev > rel:
				c.sendEvent(jute.EventNodeDataChanged, p)
			default:
				wm.addLocked(&wm.data, p, c, armed)
			}
		}
		for _, p := range req.ExistWatches {
			n, _, err := lookup(v, p)
			if err != nil {
				return reply{fail: err}
			}
			if n != nil {
				c.sendEvent(jute.EventNodeCreated, p)
			} else {
				wm.addLocked(&wm.data, p, c, armed)
			}
		}
		for _, p := range req.ChildWatches {
			n, d, err := lookup(v, p)
			if err != nil {
				return reply{fail: err}
			}
			switch {
			case n == nil:
				c.sendEvent(jute.EventNodeDeleted, p)
			case core.StatOf(n, d).Pzxid > rel:
				c.sendEvent(jute.EventNodeChildrenChanged, p)
			default:
				wm.addLocked(&wm.child, p, c, armed)
			}
		}
		for _, p := range req.PersistentWatches {
			e := watchEntry{mode: watchPersistent, armedAt: v.Rev()}
			wm.addLocked(&wm.data, p, c, e)
			wm.addLocked(&wm.child, p, c, e)
		}
		for _, p := range req.PersistentRecursiveWatches {
			e := watchEntry{mode: watchRecursive, armedAt: v.Rev()}
			wm.addLocked(&wm.data, p, c, e)
			wm.addLocked(&wm.child, p, c, e)
		}
		return reply{}
	})
}

func (c *conn) addWatch(req *jute.AddWatchRequest) reply {
	// The watch manager is locked (see reply).
	rev := c.srv.watches.dispatched.Load()
	mode := watchPersistent
	if req.Mode == jute.AddWatchPersistentRecursive {
		mode = watchRecursive
	} else if req.Mode != jute.AddWatchPersistent {
		return errReply(rev, jute.CodeBadArguments)
	}
	c.srv.watches.addWatchLocked(c, req.Path, mode, rev)
	// ZooKeeper sends an ErrorResponse(0) body, which clients ignore.
	return reply{zxid: rev, body: &jute.ErrorResponse{Err: jute.CodeOk}}
}

// removeWatches removes (or, for checkWatches, only looks for) watches;
// none found is NoWatcher. The server sends no event for a removal.
func (c *conn) removeWatches(path string, typ jute.WatcherType, remove bool) reply {
	zxid := c.srv.watches.Dispatched()
	var found bool
	if remove {
		found = c.srv.watches.remove(c, path, typ)
	} else {
		found = c.srv.watches.has(c, path, typ)
	}
	if !found {
		return errReply(zxid, jute.CodeNoWatcher)
	}
	return reply{zxid: zxid}
}
