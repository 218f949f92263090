package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/januskv/janus/core"
)

// keyValue renders a node as etcd's KeyValue.
func keyValue(n *core.Node) *mvccpb.KeyValue {
	if n == nil {
		return nil
	}
	return &mvccpb.KeyValue{
		Key:            n.Key,
		Value:          n.Value,
		CreateRevision: n.CreateRev,
		ModRevision:    n.ModRev,
		Version:        n.Version,
		Lease:          n.Lease,
	}
}

func keyValues(ns []*core.Node) []*mvccpb.KeyValue {
	if len(ns) == 0 {
		return nil
	}
	out := make([]*mvccpb.KeyValue, 0, len(ns))
	for _, n := range ns {
		if n.Implicit {
			continue // ZooKeeper-only parents are not etcd keys
		}
		out = append(out, keyValue(n))
	}
	return out
}

// rangeOptions maps a RangeRequest's options onto the core's.
func rangeOptions(r *pb.RangeRequest) *core.RangeOptions {
	return &core.RangeOptions{
		Rev:          r.Revision,
		Limit:        r.Limit,
		SortOrder:    core.SortOrder(r.SortOrder),
		SortTarget:   core.SortTarget(r.SortTarget),
		KeysOnly:     r.KeysOnly,
		CountOnly:    r.CountOnly,
		MinModRev:    r.MinModRevision,
		MaxModRev:    r.MaxModRevision,
		MinCreateRev: r.MinCreateRevision,
		MaxCreateRev: r.MaxCreateRevision,
	}
}

func rangeOp(r *pb.RangeRequest) core.TxnOp {
	return core.TxnOp{Kind: core.OpRange, Key: r.Key, End: r.RangeEnd, Range: rangeOptions(r)}
}

func putOp(r *pb.PutRequest) core.TxnOp {
	return core.TxnOp{
		Kind: core.OpPut, Key: r.Key, Value: r.Value, Lease: r.Lease,
		PrevKV: r.PrevKv, IgnoreValue: r.IgnoreValue, IgnoreLease: r.IgnoreLease,
	}
}

func deleteOp(r *pb.DeleteRangeRequest) core.TxnOp {
	return core.TxnOp{Kind: core.OpDeleteRange, Key: r.Key, End: r.RangeEnd, PrevKV: r.PrevKv}
}

// txn translates an etcd Txn, nested Txns included. The request has been
// validated, so every RequestOp holds exactly one known request.
func txn(r *pb.TxnRequest) *core.Txn {
	t := &core.Txn{
		Compares: make([]core.Compare, 0, len(r.Compare)),
		Success:  requestOps(r.Success),
		Failure:  requestOps(r.Failure),
	}
	for _, c := range r.Compare {
		t.Compares = append(t.Compares, compare(c))
	}
	return t
}

func requestOps(ops []*pb.RequestOp) []core.TxnOp {
	out := make([]core.TxnOp, 0, len(ops))
	for _, op := range ops {
		switch v := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			out = append(out, rangeOp(v.RequestRange))
		case *pb.RequestOp_RequestPut:
			out = append(out, putOp(v.RequestPut))
		case *pb.RequestOp_RequestDeleteRange:
			out = append(out, deleteOp(v.RequestDeleteRange))
		case *pb.RequestOp_RequestTxn:
			out = append(out, core.TxnOp{Kind: core.OpTxn, Txn: txn(v.RequestTxn)})
		}
	}
	return out
}

func compare(c *pb.Compare) core.Compare {
	cc := core.Compare{Key: c.Key, End: c.RangeEnd}
	switch c.Result {
	case pb.Compare_EQUAL:
		cc.Result = core.CompareEqual
	case pb.Compare_GREATER:
		cc.Result = core.CompareGreater
	case pb.Compare_LESS:
		cc.Result = core.CompareLess
	case pb.Compare_NOT_EQUAL:
		cc.Result = core.CompareNotEqual
	}
	switch c.Target {
	case pb.Compare_VERSION:
		cc.Target, cc.Int = core.CompareVersion, c.GetVersion()
	case pb.Compare_CREATE:
		cc.Target, cc.Int = core.CompareCreateRev, c.GetCreateRevision()
	case pb.Compare_MOD:
		cc.Target, cc.Int = core.CompareModRev, c.GetModRevision()
	case pb.Compare_VALUE:
		cc.Target, cc.Value = core.CompareValue, c.GetValue()
	case pb.Compare_LEASE:
		cc.Target, cc.Int = core.CompareLease, c.GetLease()
	}
	return cc
}

// txnResponse renders a core Txn result with the given header. As in etcd,
// the header of each op's response carries only the revision that op saw.
func txnResponse(res *core.Result, t *core.Txn, h *pb.ResponseHeader) *pb.TxnResponse {
	branch := t.Success
	if !res.Succeeded {
		branch = t.Failure
	}
	resp := &pb.TxnResponse{
		Header:    h,
		Succeeded: res.Succeeded,
		Responses: make([]*pb.ResponseOp, 0, len(res.Ops)),
	}
	for i := range res.Ops {
		resp.Responses = append(resp.Responses, responseOp(&res.Ops[i], &branch[i]))
	}
	return resp
}

func responseOp(r *core.OpResult, op *core.TxnOp) *pb.ResponseOp {
	switch r.Kind {
	case core.OpRange:
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rangeResponse(r, op.Range, revHeader(r.Rev))}}
	case core.OpPut:
		resp := &pb.PutResponse{Header: revHeader(r.Rev)}
		if len(r.Prev) > 0 {
			resp.PrevKv = keyValue(r.Prev[0])
		}
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: resp}}
	case core.OpDeleteRange:
		resp := &pb.DeleteRangeResponse{Header: revHeader(r.Rev), Deleted: r.Deleted, PrevKvs: keyValues(r.Prev)}
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: resp}}
	case core.OpTxn:
		// etcd leaves a nested Txn's own header empty.
		resp := txnResponse(r.Txn, op.Txn, &pb.ResponseHeader{})
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: resp}}
	}
	return &pb.ResponseOp{}
}

func rangeResponse(r *core.OpResult, opts *core.RangeOptions, h *pb.ResponseHeader) *pb.RangeResponse {
	resp := &pb.RangeResponse{Header: h, Kvs: keyValues(r.Nodes), More: r.More, Count: r.Count}
	if opts != nil && opts.KeysOnly && opts.SortTarget != core.SortByValue {
		// etcd answers these from its key index alone, which knows no
		// lease: the lease is left out along with the value.
		for _, kv := range resp.Kvs {
			kv.Lease = 0
		}
	}
	return resp
}

// readOnly reports whether a Txn, nested ones included, only reads, so it
// can be answered from a view without going through the log.
func readOnly(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch v := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
			case *pb.RequestOp_RequestTxn:
				if !readOnly(v.RequestTxn) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// serializableTxn reports whether every range of a read-only Txn asked for
// a serializable read.
func serializableTxn(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch v := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				if !v.RequestRange.Serializable {
					return false
				}
			case *pb.RequestOp_RequestTxn:
				if !serializableTxn(v.RequestTxn) {
					return false
				}
			}
		}
	}
	return true
}

func revHeader(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }
