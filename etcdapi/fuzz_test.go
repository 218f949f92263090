package etcdapi

import (
	"bytes"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/januskv/janus/core"
)

// The fuzz targets feed arbitrary bytes, decoded as the gRPC server would
// decode them, through what a request meets before and after the log:
// validation, translation, the log's codec, apply on a small state and the
// response. None of it may panic; what validation lets through must
// translate whole, survive the codec and apply without an internal error.
// Run one with e.g. `go test ./etcdapi -run '^$' -fuzz FuzzTxn -fuzztime 1m`;
// without -fuzz the seeds below run as ordinary tests.

// fuzzState is a small state with keys at several revisions and one lease,
// for compares and ranges to find something.
func fuzzState(t *testing.T) *core.MemState {
	t.Helper()
	m := core.NewMemState()
	ops := []*core.Op{
		{LeaseGrant: &core.LeaseGrant{ID: 7, TTL: 60}},
		{Txn: &core.Txn{Success: []core.TxnOp{
			{Kind: core.OpPut, Key: []byte("a"), Value: []byte("1")},
			{Kind: core.OpPut, Key: []byte("b"), Value: []byte("2"), Lease: 7},
		}}},
		{Txn: &core.Txn{Success: []core.TxnOp{{Kind: core.OpPut, Key: []byte("a"), Value: []byte("3")}}}},
	}
	for i, op := range ops {
		res, _, err := m.ApplyEntry(&core.Entry{Index: uint64(i + 1), Time: 1, Op: *op})
		if err != nil || res.Err != nil {
			t.Fatalf("seed state op %d: %v %v", i, err, res.Err)
		}
	}
	return m
}

// applyTranslated runs op through the log's codec and applies it.
func applyTranslated(t *testing.T, op *core.Op) *core.Result {
	t.Helper()
	enc := core.EncodeOp(op)
	dec, err := core.DecodeOp(enc)
	if err != nil {
		t.Fatalf("decode of an encoded op: %v", err)
	}
	if again := core.EncodeOp(dec); !bytes.Equal(enc, again) {
		t.Fatalf("op changed through the codec:\n% x\n% x", enc, again)
	}
	res, _, err := fuzzState(t).ApplyEntry(&core.Entry{Index: 100, Time: 2, Op: *dec})
	if err != nil {
		// An internal error would stop the member; a refusal belongs in
		// res.Err.
		t.Fatalf("apply: %v", err)
	}
	return res
}

// checkEtcdError fails unless err is a gRPC status, as every refusal sent
// to a client must be.
func checkEtcdError(t *testing.T, err error) {
	t.Helper()
	if _, ok := status.FromError(err); !ok {
		t.Fatalf("refusal %v is no gRPC status", err)
	}
}

func seedTxns() [][]byte {
	reqs := []*pb.TxnRequest{
		{},
		{Success: []*pb.RequestOp{put("a"), del("b", "")}},
		{Success: []*pb.RequestOp{put("a"), put("a")}},
		{
			Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("3")}}},
			Success: []*pb.RequestOp{nested([]*pb.RequestOp{put("c")}, []*pb.RequestOp{del("a", "\x00")})},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), SortTarget: pb.RangeRequest_MOD, Limit: 1}}}},
		},
		{Compare: []*pb.Compare{{Key: []byte("b"), Target: pb.Compare_LEASE, Result: pb.Compare_NOT_EQUAL, RangeEnd: []byte("c")}}},
		{Success: []*pb.RequestOp{{}}},
		{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("x"), Lease: 99}}}}},
		{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a"), IgnoreValue: true, IgnoreLease: true}}}}},
	}
	var out [][]byte
	for _, r := range reqs {
		b, err := proto.Marshal(r)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

func FuzzTxn(f *testing.F) {
	for _, b := range seedTxns() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r pb.TxnRequest
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		if err := checkTxn(&r, DefaultMaxTxnOps); err != nil {
			checkEtcdError(t, err)
			return
		}
		_, _, errThen := checkDuplicates(r.Success)
		_, _, errElse := checkDuplicates(r.Failure)
		if err := errors.Join(errThen, errElse); err != nil {
			checkEtcdError(t, errThen)
			checkEtcdError(t, errElse)
			return
		}
		op := &core.Op{Txn: txn(&r)}
		checkWhole(t, &r, op.Txn)
		readOnly(&r)
		serializableTxn(&r)
		res := applyTranslated(t, op)
		if res.Err != nil {
			checkEtcdError(t, grpcError(res.Err))
			return
		}
		resp := txnResponse(res, op.Txn, revHeader(res.Rev))
		if len(resp.Responses) != len(res.Ops) {
			t.Fatalf("%d responses for %d results", len(resp.Responses), len(res.Ops))
		}
		if _, err := proto.Marshal(resp); err != nil {
			t.Fatalf("response does not marshal: %v", err)
		}
	})
}

// checkWhole fails if translation dropped an op or a compare: validation
// admits only RequestOps the translation knows.
func checkWhole(t *testing.T, r *pb.TxnRequest, ct *core.Txn) {
	t.Helper()
	if len(ct.Compares) != len(r.Compare) || len(ct.Success) != len(r.Success) || len(ct.Failure) != len(r.Failure) {
		t.Fatalf("translated %d/%d/%d compares/success/failure from %d/%d/%d",
			len(ct.Compares), len(ct.Success), len(ct.Failure), len(r.Compare), len(r.Success), len(r.Failure))
	}
	for i, op := range r.Success {
		if n := op.GetRequestTxn(); n != nil {
			checkWhole(t, n, ct.Success[i].Txn)
		}
	}
	for i, op := range r.Failure {
		if n := op.GetRequestTxn(); n != nil {
			checkWhole(t, n, ct.Failure[i].Txn)
		}
	}
}

func FuzzPutDeleteRange(f *testing.F) {
	for _, m := range []proto.Message{
		&pb.PutRequest{Key: []byte("a"), Value: []byte("v"), PrevKv: true},
		&pb.PutRequest{Key: []byte("b"), IgnoreLease: true, IgnoreValue: true},
		&pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("\x00"), PrevKv: true},
		&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_CREATE, Limit: 1, MinModRevision: 2},
		&pb.RangeRequest{Key: []byte("\x00"), RangeEnd: []byte("\x00"), CountOnly: true, SortOrder: 7},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The same bytes decode as each request kind (their fields
		// overlap), so one corpus drives all three.
		var p pb.PutRequest
		if proto.Unmarshal(data, &p) == nil {
			if err := checkPut(&p); err != nil {
				checkEtcdError(t, err)
			} else {
				fuzzOne(t, putOp(&p))
			}
		}
		var d pb.DeleteRangeRequest
		if proto.Unmarshal(data, &d) == nil {
			if err := checkDelete(&d); err != nil {
				checkEtcdError(t, err)
			} else {
				fuzzOne(t, deleteOp(&d))
			}
		}
		var r pb.RangeRequest
		if proto.Unmarshal(data, &r) == nil {
			if err := checkRange(&r); err != nil {
				checkEtcdError(t, err)
			} else {
				res := applyTranslated(t, &core.Op{Txn: &core.Txn{Success: []core.TxnOp{rangeOp(&r)}}})
				if res.Err == nil && len(res.Ops) == 1 {
					rangeResponse(&res.Ops[0], rangeOptions(&r), revHeader(res.Rev))
				}
			}
		}
	})
}

func fuzzOne(t *testing.T, op core.TxnOp) {
	t.Helper()
	res := applyTranslated(t, &core.Op{Txn: &core.Txn{Success: []core.TxnOp{op}}})
	if res.Err != nil {
		checkEtcdError(t, grpcError(res.Err))
	}
}
