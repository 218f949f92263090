package etcdapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeStream is a server stream that receives n messages, then ends with
// io.EOF.
type fakeStream struct {
	grpc.ServerStream
	left int
}

func (s *fakeStream) Context() context.Context { return context.Background() }
func (s *fakeStream) SendMsg(any) error        { return nil }
func (s *fakeStream) RecvMsg(any) error {
	if s.left == 0 {
		return io.EOF
	}
	s.left--
	return nil
}

// grpcMetrics counts what go-grpc-middleware's Prometheus provider (which
// etcd's go-grpc-prometheus matches) counts: the same calls through both
// give the same series with the same values.
func TestGRPCMetricsMatchTheLibrary(t *testing.T) {
	ours := newGRPCMetrics()
	lib := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	// Both start every method of the services at zero.
	srv := grpc.NewServer()
	pb.RegisterKVServer(srv, &kvServer{})
	pb.RegisterWatchServer(srv, &watchServer{})
	pb.RegisterLeaseServer(srv, &leaseServer{})
	pb.RegisterMaintenanceServer(srv, &maintenanceServer{})
	ours.initialize(srv)
	lib.InitializeMetrics(srv)
	type interceptors struct {
		unary  grpc.UnaryServerInterceptor
		stream grpc.StreamServerInterceptor
	}
	for _, ic := range []interceptors{
		{ours.unary, ours.stream},
		{lib.UnaryServerInterceptor(), lib.StreamServerInterceptor()},
	} {
		unary := func(method string, err error) {
			info := &grpc.UnaryServerInfo{FullMethod: method}
			_, _ = ic.unary(context.Background(), "req", info, func(context.Context, any) (any, error) { return "resp", err })
		}
		unary("/etcdserverpb.KV/Put", nil)
		unary("/etcdserverpb.KV/Put", nil)
		unary("/etcdserverpb.KV/Put", status.Error(codes.InvalidArgument, "etcdserver: key is not provided"))
		unary("/etcdserverpb.KV/Range", context.Canceled)
		unary("/etcdserverpb.KV/Range", errors.New("not a status"))
		unary("/etcdserverpb.KV/Txn", status.Error(codes.Code(40), "a code gRPC does not define"))
		stream := func(method string, client, server bool, sends int, err error) {
			info := &grpc.StreamServerInfo{FullMethod: method, IsClientStream: client, IsServerStream: server}
			_ = ic.stream(nil, &fakeStream{left: 3}, info, func(_ any, ss grpc.ServerStream) error {
				for ss.RecvMsg(nil) == nil {
				}
				for range sends {
					_ = ss.SendMsg("m")
				}
				return err
			})
		}
		stream("/etcdserverpb.Watch/Watch", true, true, 5, nil)
		stream("/etcdserverpb.Lease/LeaseKeepAlive", true, true, 2, status.Error(codes.Unavailable, "gone"))
		stream("/etcdserverpb.Maintenance/Snapshot", false, true, 4, nil)
	}
	if got, want := gather(t, ours), gather(t, lib); !slices.Equal(got, want) {
		t.Errorf("series differ:\nours:\n%s\nlibrary:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestStreamTypeNamesAsTheLibrary(t *testing.T) {
	for _, tc := range []struct {
		client, server bool
		want           string
	}{
		{false, false, string(grpcprom.Unary)},
		{true, false, string(grpcprom.ClientStream)},
		{false, true, string(grpcprom.ServerStream)},
		{true, true, string(grpcprom.BidiStream)},
	} {
		if got := streamType(tc.client, tc.server); got != tc.want {
			t.Errorf("streamType(%v, %v) = %q, want %q", tc.client, tc.server, got, tc.want)
		}
	}
}

// gather lists c's series as "name{labels} value" lines, a histogram by
// its count (its sums and buckets are timings).
func gather(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("%s{%s} %s %v", f.GetName(), strings.Join(labels, ","), f.GetHelp(), value(m)))
		}
	}
	slices.Sort(out)
	return out
}

func value(m *dto.Metric) float64 {
	if h := m.GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return m.GetCounter().GetValue()
}
