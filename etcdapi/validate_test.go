package etcdapi

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func put(k string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
}

func del(k, end string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(k), RangeEnd: []byte(end)}}}
}

func nested(then, els []*pb.RequestOp) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: then, Failure: els}}}
}

func TestCheckDuplicates(t *testing.T) {
	tests := []struct {
		name string
		ops  []*pb.RequestOp
		dup  bool
	}{
		{"distinct puts", []*pb.RequestOp{put("a"), put("b")}, false},
		{"put twice", []*pb.RequestOp{put("a"), put("a")}, true},
		{"put and delete", []*pb.RequestOp{put("a"), del("a", "")}, true},
		{"put in deleted range", []*pb.RequestOp{del("a", "c"), put("b")}, true},
		{"put at range end", []*pb.RequestOp{del("a", "c"), put("c")}, false},
		{"delete twice", []*pb.RequestOp{del("a", ""), del("a", "")}, false},
		// etcd reads a "\x00" end literally: no key falls in it.
		{"put after from-key delete", []*pb.RequestOp{del("a", "\x00"), put("b")}, false},
		{"put here and in nested", []*pb.RequestOp{put("a"), nested([]*pb.RequestOp{put("a")}, nil)}, true},
		{"put in both nested branches", []*pb.RequestOp{nested([]*pb.RequestOp{put("a")}, []*pb.RequestOp{put("a")})}, false},
		{"put in else of nested after here", []*pb.RequestOp{put("a"), nested(nil, []*pb.RequestOp{put("a")})}, true},
		{"nested delete, put here", []*pb.RequestOp{nested([]*pb.RequestOp{del("a", "")}, nil), put("a")}, true},
		{"delete here, nested put", []*pb.RequestOp{del("a", ""), nested(nil, []*pb.RequestOp{put("a")})}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := checkDuplicates(tt.ops)
			if (err != nil) != tt.dup {
				t.Fatalf("checkDuplicates = %v, want duplicate %v", err, tt.dup)
			}
			if err != nil && err != rpctypes.ErrGRPCDuplicateKey {
				t.Fatalf("error %v, want %v", err, rpctypes.ErrGRPCDuplicateKey)
			}
		})
	}
}

func TestCheckTxnOpLimit(t *testing.T) {
	ops := func(n int) []*pb.RequestOp {
		out := make([]*pb.RequestOp, n)
		for i := range out {
			out[i] = put(string(rune('a' + i%26)))
		}
		return out
	}
	tests := []struct {
		name string
		txn  *pb.TxnRequest
		want error
	}{
		{"at limit", &pb.TxnRequest{Success: ops(4), Failure: ops(4)}, nil},
		{"then over", &pb.TxnRequest{Success: ops(5)}, rpctypes.ErrGRPCTooManyOps},
		{"else over", &pb.TxnRequest{Failure: ops(5)}, rpctypes.ErrGRPCTooManyOps},
		// A nested Txn gets what the outer one leaves: 4-2 = 2 here.
		{"nested over the remainder", &pb.TxnRequest{Success: []*pb.RequestOp{put("x"), nested(ops(3), nil)}}, rpctypes.ErrGRPCTooManyOps},
		{"empty op", &pb.TxnRequest{Success: []*pb.RequestOp{{}}}, rpctypes.ErrGRPCKeyNotFound},
		{"empty compare key", &pb.TxnRequest{Compare: []*pb.Compare{{}}}, rpctypes.ErrGRPCEmptyKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkTxn(tt.txn, 4); err != tt.want {
				t.Fatalf("checkTxn = %v, want %v", err, tt.want)
			}
		})
	}
}
