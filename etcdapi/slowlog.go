package etcdapi

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// expectedRequestDuration is how long a request may take before it is
// logged as slow: etcd's expected duration for one request.
const expectedRequestDuration = 100 * time.Millisecond

// slowRequests logs every unary request that took longer than
// expectedRequestDuration with etcd's message and fields ("apply request
// took too long", took, expected-duration, request, response size), so
// that what operators grep etcd's logs for finds the same in Janus's.
func (s *Server) slowRequests(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if took := time.Since(start); took > expectedRequestDuration {
		attrs := []any{
			"took", took.String(),
			"expected-duration", expectedRequestDuration.String(),
			"method", info.FullMethod,
			"request", describeRequest(req),
		}
		if m, ok := resp.(proto.Message); ok && err == nil {
			attrs = append(attrs, "response-size", proto.Size(m))
		}
		if err != nil {
			attrs = append(attrs, "error", err.Error())
		}
		s.log.Warn("apply request took too long", attrs...)
	}
	return resp, err
}

// describeRequest names a request by its kind and keys, never its values,
// and bounded: a log line must not carry a client's data.
func describeRequest(req any) string {
	const maxKey = 64
	key := func(b []byte) string {
		if len(b) > maxKey {
			return fmt.Sprintf("%q...(%d bytes)", b[:maxKey], len(b))
		}
		return fmt.Sprintf("%q", b)
	}
	switch r := req.(type) {
	case *pb.RangeRequest:
		return fmt.Sprintf("read_only range key:%s range_end:%s limit:%d revision:%d", key(r.Key), key(r.RangeEnd), r.Limit, r.Revision)
	case *pb.PutRequest:
		return fmt.Sprintf("put key:%s value_size:%d lease:%d", key(r.Key), len(r.Value), r.Lease)
	case *pb.DeleteRangeRequest:
		return fmt.Sprintf("delete_range key:%s range_end:%s", key(r.Key), key(r.RangeEnd))
	case *pb.TxnRequest:
		return fmt.Sprintf("txn compare:%d success:%d failure:%d", len(r.Compare), len(r.Success), len(r.Failure))
	case *pb.CompactionRequest:
		return fmt.Sprintf("compaction revision:%d", r.Revision)
	case *pb.LeaseGrantRequest:
		return fmt.Sprintf("lease_grant ttl:%d", r.TTL)
	case *pb.LeaseRevokeRequest:
		return fmt.Sprintf("lease_revoke id:%x", r.ID)
	default:
		return fmt.Sprintf("%T", req)
	}
}
