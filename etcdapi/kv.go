package etcdapi

import (
	"context"
	"errors"

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
	if !r.Serializable {
		if err := k.s.b.Linearize(ctx); err != nil {
			return nil, grpcError(err)
		}
	}
	c, err := k.s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.may(r.Key, r.RangeEnd, core.AuthRead); err != nil {
		return nil, err
	}
	latest, err := k.s.b.Read(ctx, 0)
	if err != nil {
		return nil, grpcError(err)
	}
	defer latest.Close()
	// The header carries the current revision even for a read of an older
	// one, as etcd's does.
	view := core.View(latest)
	if r.Revision > 0 && r.Revision != latest.Rev() {
		if r.Revision > latest.Rev() {
			return nil, rpctypes.ErrGRPCFutureRev
		}
		old, err := k.s.b.Read(ctx, r.Revision)
		if err != nil {
			return nil, grpcError(err)
		}
		defer old.Close()
		view = old
	}
	if refused, err := core.CheckRangeACL(view, r.Key, r.RangeEnd, c.zkAuth()); refused != nil || err != nil {
		return nil, grpcError(errors.Join(refused, err))
	}
	res, err := core.DoRange(view, r.Key, r.RangeEnd, *rangeOptions(r))
	if err != nil {
		return nil, grpcError(err)
	}
	if err := c.stillCurrent(k.s); err != nil {
		return nil, err
	}
	return rangeResponse(&res, rangeOptions(r), k.s.header(latest.Rev())), nil
}

// RangeStream is answered Unimplemented, which makes clients (Kubernetes
// among them) fall back to paged Range calls.
func (k *kvServer) RangeStream(*pb.RangeRequest, grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	return status.Error(codes.Unimplemented, "method RangeStream not implemented")
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
	if readOnly(r) {
		res, err := k.readTxn(ctx, op, r)
		if err != nil {
			return nil, err
		}
		return txnResponse(res, op.Txn, k.s.header(res.Rev)), nil
	}
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
	op.AuthCheck, op.Txn.Auth = c.check(), c.zkAuth()
	res, err := k.s.propose(ctx, op)
	if err != nil {
		return nil, err
	}
	return txnResponse(res, op.Txn, k.s.header(res.Rev)), nil
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
	op.Txn.Auth = c.zkAuth()
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
	if r.Revision == 0 && k.s.b.Status().CompactRev == 0 {
		// etcd accepts compacting to revision 0 on a store never
		// compacted, where the core's "nothing below 0" refuses it.
		return &pb.CompactionResponse{Header: k.s.header(k.s.currentRev())}, nil
	}
	res, err := k.s.propose(ctx, &core.Op{Compact: &core.Compact{Rev: r.Revision}, AuthCheck: c.check()})
	if err != nil {
		return nil, err
	}
	return &pb.CompactionResponse{Header: k.s.header(res.Rev)}, nil
}

// propose orders op through the log and turns a refusal into etcd's error.
// An op over a storage limit is refused before it is proposed.
func (s *Server) propose(ctx context.Context, op *core.Op) (*core.Result, error) {
	if err := core.CheckOp(op); err != nil {
		return nil, grpcError(err)
	}
	res, err := s.b.Propose(ctx, op)
	if err != nil {
		return nil, grpcError(err)
	}
	if res.Err != nil {
		return nil, grpcError(res.Err)
	}
	return res, nil
}
