package etcdapi

import (
	"bytes"
	"context"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/januskv/janus/core"
)

type kvServer struct {
	pb.UnimplementedKVServer
	s *Server
}

func (k *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := checkRange(r); err != nil {
		return nil, err
	}
	view, rev, done, c, err := k.rangeView(ctx, r)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := core.CheckRangeACL(view, r.Key, r.RangeEnd, c.zkAuth()); err != nil {
		return nil, grpcError(err)
	}
	res, err := core.DoRange(view, r.Key, r.RangeEnd, *rangeOptions(r))
	if err != nil {
		return nil, grpcError(err)
	}
	if err := c.stillCurrent(k.s); err != nil {
		return nil, err
	}
	return rangeResponse(&res, rangeOptions(r), k.s.header(rev)), nil
}

// rangeView returns the view a Range reads (at r.Revision, or the latest
// after a linearizable wait unless r is serializable), the current
// revision, which etcd's header carries even for a read of an older one,
// and the function that releases the views.
func (k *kvServer) rangeView(ctx context.Context, r *pb.RangeRequest) (core.View, int64, func(), *caller, error) {
	if !r.Serializable {
		if err := k.s.b.Linearize(ctx); err != nil {
			return nil, 0, nil, nil, grpcError(err)
		}
	}
	// etcd checks permissions before the revision: after the
	// linearizable wait, so the auth store is as recent as the data.
	c, err := k.s.caller(ctx)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	if err := c.may(r.Key, r.RangeEnd, core.AuthRead); err != nil {
		return nil, 0, nil, nil, err
	}
	latest, err := k.s.b.Read(ctx, 0)
	if err != nil {
		return nil, 0, nil, nil, grpcError(err)
	}
	if r.Revision <= 0 || r.Revision == latest.Rev() {
		return latest, latest.Rev(), latest.Close, c, nil
	}
	if r.Revision > latest.Rev() {
		latest.Close()
		return nil, 0, nil, nil, rpctypes.ErrGRPCFutureRev
	}
	old, err := k.s.b.Read(ctx, r.Revision)
	if err != nil {
		latest.Close()
		return nil, 0, nil, nil, grpcError(err)
	}
	return old, latest.Rev(), func() { old.Close(); latest.Close() }, c, nil
}

// firstStreamChunk is the number of keys in RangeStream's first chunk, as
// in etcd v3.7.
const firstStreamChunk = 10

// RangeStream answers a range in chunks, as etcd v3.7 does: every chunk but
// the last carries key-values only; the last also carries the header, more
// and the count of the whole range. Chunks start at 10 keys and double
// while a chunk's encoding stays under half of --max-request-bytes (halve
// above twice that). All chunks read one view, at r.Revision or at the
// revision current when the stream began, so later writes do not show
// and no chunk is refused half way through; only the current chunk is
// held in memory.
func (k *kvServer) RangeStream(r *pb.RangeRequest, stream grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	if err := checkRange(r); err != nil {
		return err
	}
	opts := rangeOptions(r)
	if !(opts.SortOrder == core.SortNone || opts.SortTarget == core.SortByKey && opts.SortOrder == core.SortAscend) {
		return status.Error(codes.Unimplemented, "RangeStream does not support custom sort orders")
	}
	if opts.MinModRev != 0 || opts.MaxModRev != 0 || opts.MinCreateRev != 0 || opts.MaxCreateRev != 0 {
		return status.Error(codes.Unimplemented, "RangeStream does not support revision filters")
	}
	view, rev, done, c, err := k.rangeView(stream.Context(), r)
	if err != nil {
		return err
	}
	defer done()
	if err := core.CheckRangeACL(view, r.Key, r.RangeEnd, c.zkAuth()); err != nil {
		return grpcError(err)
	}
	send := func(resp *pb.RangeResponse) error {
		return stream.Send(&pb.RangeStreamResponse{RangeResponse: resp})
	}
	if r.CountOnly {
		n, err := core.CountRange(view, r.Key, r.RangeEnd)
		if err != nil {
			return grpcError(err)
		}
		return send(&pb.RangeResponse{Header: k.s.header(rev), Count: n})
	}
	total := r.Limit
	if total == 0 {
		total = math.MaxInt64
	}
	chunk := *opts
	chunk.Limit = min(firstStreamChunk, total)
	key, sent := r.Key, int64(0)
	for {
		nodes, more, err := core.RangeChunk(view, key, r.RangeEnd, chunk)
		if err != nil {
			return grpcError(err)
		}
		resp := rangeResponse(&core.OpResult{Nodes: nodes}, opts, nil)
		sent += int64(len(resp.Kvs))
		var next []byte
		if more {
			next = append(bytes.Clone(nodes[len(nodes)-1].Key), 0)
		}
		// etcd sizes the next chunk by the Range answer it read this
		// one from: a header, the key-values, more and a count.
		size := proto.Size(&pb.RangeResponse{Header: revHeader(rev), Kvs: resp.Kvs, More: more, Count: int64(len(resp.Kvs))})
		if last := !more || sent == total; last {
			resp.Header, resp.More, resp.Count = k.s.header(rev), more, sent
			if more {
				rest, err := core.CountRange(view, next, r.RangeEnd)
				if err != nil {
					return grpcError(err)
				}
				resp.Count += rest
			}
			return send(resp)
		}
		if err := send(resp); err != nil {
			return err
		}
		key = next
		chunk.Limit = min(nextChunkLimit(chunk.Limit, size, k.s.cfg.MaxRequestBytes), total-sent)
	}
}

// nextChunkLimit is etcd's adjustChunkLimit: double a chunk that came out
// under half the target size, halve one over twice it, never below 1.
func nextChunkLimit(last int64, size, target int) int64 {
	switch {
	case size < target/2:
		last *= 2
	case size > target*2:
		last /= 2
	}
	return max(last, 1)
}

// checkSize refuses a write whose encoding exceeds the request limit, as
// etcd does for the entry it would log.
func (k *kvServer) checkSize(m proto.Message) error {
	if proto.Size(m) > k.s.cfg.MaxRequestBytes {
		return rpctypes.ErrGRPCRequestTooLarge
	}
	return nil
}

func (k *kvServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := checkPut(r); err != nil {
		return nil, err
	}
	if err := k.checkSize(r); err != nil {
		return nil, err
	}
	c, err := k.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.put(k.s.leaseKeysOf(ctx), r); err != nil {
		return nil, err
	}
	res, err := k.s.propose(ctx, &core.Op{Txn: &core.Txn{Success: []core.TxnOp{putOp(r)}, Auth: c.zkAuth()}, AuthCheck: c.check()})
	if err != nil {
		return nil, err
	}
	resp := &pb.PutResponse{Header: k.s.header(res.Rev)}
	if ops := res.Ops; len(ops) == 1 && len(ops[0].Prev) > 0 {
		resp.PrevKv = keyValue(ops[0].Prev[0])
	}
	return resp, nil
}

func (k *kvServer) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if err := checkDelete(r); err != nil {
		return nil, err
	}
	if err := k.checkSize(r); err != nil {
		return nil, err
	}
	c, err := k.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.del(r); err != nil {
		return nil, err
	}
	res, err := k.s.propose(ctx, &core.Op{Txn: &core.Txn{Success: []core.TxnOp{deleteOp(r)}, Auth: c.zkAuth()}, AuthCheck: c.check()})
	if err != nil {
		return nil, err
	}
	resp := &pb.DeleteRangeResponse{Header: k.s.header(res.Rev)}
	if ops := res.Ops; len(ops) == 1 {
		resp.Deleted = ops[0].Deleted
		resp.PrevKvs = keyValues(ops[0].Prev)
	}
	return resp, nil
}

func (k *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := checkTxn(r, k.s.cfg.MaxTxnOps); err != nil {
		return nil, err
	}
	// After the cheap checks, so a huge request cannot make this
	// quadratic one expensive.
	if _, _, err := checkDuplicates(r.Success); err != nil {
		return nil, err
	}
	if _, _, err := checkDuplicates(r.Failure); err != nil {
		return nil, err
	}
	op := &core.Op{Txn: txn(r)}
	var res *core.Result
	var err error
	if readOnly(r) {
		res, err = k.readTxn(ctx, op, r)
		if err != nil {
			return nil, err
		}
	} else {
		if err := k.checkSize(r); err != nil {
			return nil, err
		}
		c, err := k.s.caller(ctx)
		if err != nil {
			return nil, err
		}
		if err := c.txn(k.s.leaseKeysOf(ctx), r); err != nil {
			return nil, err
		}
		op.AuthCheck = c.check()
		c.setZKAuth(op.Txn)
		// Opened before the Txn is ordered: a view pins its revision
		// against a compaction applied meanwhile.
		views := k.openRevViews(ctx, op.Txn, nil)
		defer views.close()
		if err := k.checkRestoredFloor(ctx, op.Txn, views); err != nil {
			return nil, err
		}
		res, err = k.s.propose(ctx, op)
		if err != nil {
			return nil, err
		}
		if err := k.readRevRanges(ctx, op.Txn, res, views); err != nil {
			return nil, err
		}
	}
	return txnResponse(res, op.Txn, k.s.header(res.Rev)), nil
}

// revViews are the views a Txn's ranges at a revision read, by revision.
type revViews map[int64]core.ReadView

func (vs revViews) close() {
	for _, v := range vs {
		v.Close()
	}
}

// openRevViews opens a view at every revision a range of t names, in either
// branch, leaving out those it cannot open: Apply refuses the Txn if that
// still holds when it runs (checkRestoredFloor refuses it before, for a
// revision only this member has lost).
func (k *kvServer) openRevViews(ctx context.Context, t *core.Txn, vs revViews) revViews {
	walkRevRanges(t, func(rev int64) {
		if _, ok := vs[rev]; ok {
			return
		}
		v, err := k.s.b.Read(ctx, rev)
		if err != nil {
			return
		}
		if vs == nil {
			vs = revViews{}
		}
		vs[rev] = v
	})
	return vs
}

// checkRestoredFloor refuses, as compacted, a Txn with a range at a
// revision this member cannot read although the ensemble has not
// compacted it: a member restored from a snapshot holds no history before
// it. Apply, which sees only the replicated compact revision, would run
// the Txn's writes and readRevRanges then fail, answering an error for a
// Txn that was applied. Refused before it is proposed, nothing is written.
// It looks at both branches where etcd looks only at the one taken, so
// such a member refuses a little more than etcd would; a member with its
// whole history never gets here.
func (k *kvServer) checkRestoredFloor(ctx context.Context, t *core.Txn, vs revViews) error {
	var missing []int64
	walkRevRanges(t, func(rev int64) {
		if _, ok := vs[rev]; !ok {
			missing = append(missing, rev)
		}
	})
	if len(missing) == 0 {
		return nil
	}
	v, err := k.s.b.Read(ctx, 0)
	if err != nil {
		return grpcError(err)
	}
	defer v.Close()
	meta, err := v.Meta()
	if err != nil {
		return grpcError(err)
	}
	for _, rev := range missing {
		if rev >= meta.CompactRev && rev <= meta.Rev && rev < k.s.b.Status().CompactRev {
			return grpcError(core.ErrCompacted)
		}
	}
	return nil
}

// walkRevRanges calls f with the revision of every range at a revision in
// either branch of t, nested Txns included.
func walkRevRanges(t *core.Txn, f func(rev int64)) {
	for _, ops := range [][]core.TxnOp{t.Success, t.Failure} {
		for i := range ops {
			op := &ops[i]
			switch {
			case op.Kind == core.OpTxn && op.Txn != nil:
				walkRevRanges(op.Txn, f)
			case op.Kind == core.OpRange && op.Range != nil && op.Range.Rev != 0:
				f(op.Range.Rev)
			}
		}
	}
}

// readRevRanges answers the ranges at a revision of the branches of t that
// res took, which Apply checked but left empty, from views at their
// revisions. It reads them from vs, or opens the view now; that fails only
// if a revision that was in the future when the Txn arrived has been
// compacted since it was applied.
func (k *kvServer) readRevRanges(ctx context.Context, t *core.Txn, res *core.Result, vs revViews) error {
	ops := t.Success
	if !res.Succeeded {
		ops = t.Failure
	}
	for i := range res.Ops {
		op, r := &ops[i], &res.Ops[i]
		switch {
		case op.Kind == core.OpTxn && op.Txn != nil && r.Txn != nil:
			if err := k.readRevRanges(ctx, op.Txn, r.Txn, vs); err != nil {
				return err
			}
		case op.Kind == core.OpRange && op.Range != nil && op.Range.Rev != 0:
			v, ok := vs[op.Range.Rev]
			if !ok {
				opened, err := k.s.b.Read(ctx, op.Range.Rev)
				if err != nil {
					return grpcError(err)
				}
				defer opened.Close()
				v = opened
			}
			// The history read meets the znodes' ACLs as the Txn's
			// other ranges do in the core.
			if err := core.CheckRangeACL(v, op.Key, op.End, t.Auth); err != nil {
				return grpcError(err)
			}
			read, err := core.DoRange(v, op.Key, op.End, *op.Range)
			if err != nil {
				return grpcError(err)
			}
			read.Rev = r.Rev
			*r = read
		}
	}
	return nil
}

// readTxn evaluates a Txn that writes nothing on a view instead of
// ordering it through the log: it could change nothing there anyway.
func (k *kvServer) readTxn(ctx context.Context, op *core.Op, r *pb.TxnRequest) (*core.Result, error) {
	if !serializableTxn(r) {
		if err := k.s.b.Linearize(ctx); err != nil {
			return nil, grpcError(err)
		}
	}
	c, err := k.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.txn(k.s.leaseKeysOf(ctx), r); err != nil {
		return nil, err
	}
	c.setZKAuth(op.Txn)
	v, err := k.s.b.Read(ctx, 0)
	if err != nil {
		return nil, grpcError(err)
	}
	defer v.Close()
	res, _, err := core.Apply(core.NewOverlay(v), &core.Entry{Op: *op})
	if err != nil {
		return nil, grpcError(err)
	}
	if res.Err != nil {
		return nil, grpcError(res.Err)
	}
	if err := k.readRevRanges(ctx, op.Txn, res, revViews{v.Rev(): v}); err != nil {
		return nil, err
	}
	if err := c.stillCurrent(k.s); err != nil {
		return nil, err
	}
	return res, nil
}

func (k *kvServer) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	c, err := k.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.root(); err != nil {
		return nil, err
	}
	res, err := k.s.propose(ctx, &core.Op{Compact: &core.Compact{Rev: r.Revision}, AuthCheck: c.check()})
	if err != nil {
		return nil, err
	}
	return &pb.CompactionResponse{Header: k.s.header(res.Rev)}, nil
}

// propose orders op through the log, as the etcd face's, and turns a
// refusal into etcd's error. An op over a storage limit is refused before
// it is proposed.
func (s *Server) propose(ctx context.Context, op *core.Op) (*core.Result, error) {
	if err := core.CheckOp(op); err != nil {
		return nil, grpcError(err)
	}
	op.Origin = core.OriginEtcd
	res, err := s.b.Propose(ctx, op)
	if err != nil {
		return nil, grpcError(err)
	}
	if res.Err != nil {
		return nil, grpcError(res.Err)
	}
	return res, nil
}
