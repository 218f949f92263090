package etcdapi

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpcMetrics exports the series etcd's gRPC server exports (through
// go-grpc-prometheus): grpc_server_started_total, grpc_server_handled_total,
// grpc_server_msg_received_total, grpc_server_msg_sent_total and the
// grpc_server_handling_seconds histogram, with the same labels and the same
// counting (every message received or sent counts, the error that ends a
// stream included; a unary call counts one of each). It resolves each
// method's series once: the library Janus used before looked every series
// up by its label values on every call and every message, 4-5% of the
// server's CPU per put.
type grpcMetrics struct {
	started, handled, received, sent *prometheus.CounterVec
	handling                         *prometheus.HistogramVec

	methods sync.Map // full method name -> *methodMetrics
}

// methodMetrics are one method's series.
type methodMetrics struct {
	started, received, sent prometheus.Counter
	handling                prometheus.Observer
	// handled holds the counter of each code gRPC defines.
	handled [codes.Unauthenticated + 1]prometheus.Counter
	labels  [3]string // type, service, method
	m       *grpcMetrics
}

// The grpc_type label values.
const (
	grpcUnary        = "unary"
	grpcClientStream = "client_stream"
	grpcServerStream = "server_stream"
	grpcBidiStream   = "bidi_stream"
)

func newGRPCMetrics() *grpcMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(labels[:3:3], extra...))
	}
	return &grpcMetrics{
		started:  counter("grpc_server_started_total", "Total number of RPCs started on the server."),
		handled:  counter("grpc_server_handled_total", "Total number of RPCs completed on the server, regardless of success or failure.", "grpc_code"),
		received: counter("grpc_server_msg_received_total", "Total number of RPC stream messages received on the server."),
		sent:     counter("grpc_server_msg_sent_total", "Total number of gRPC stream messages sent by the server."),
		handling: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grpc_server_handling_seconds",
			Help:    "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
			Buckets: prometheus.DefBuckets,
		}, labels),
	}
}

func (g *grpcMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range []prometheus.Collector{g.started, g.handled, g.received, g.sent, g.handling} {
		c.Describe(ch)
	}
}

func (g *grpcMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range []prometheus.Collector{g.started, g.handled, g.received, g.sent, g.handling} {
		c.Collect(ch)
	}
}

// initialize creates every method's series at zero, with every code, as
// etcd's server does at start.
func (g *grpcMetrics) initialize(s *grpc.Server) {
	for service, info := range s.GetServiceInfo() {
		for _, mi := range info.Methods {
			g.method("/"+service+"/"+mi.Name, streamType(mi.IsClientStream, mi.IsServerStream))
		}
	}
}

// method returns fullMethod's series, creating them on first use.
func (g *grpcMetrics) method(fullMethod, typ string) *methodMetrics {
	if m, ok := g.methods.Load(fullMethod); ok {
		return m.(*methodMetrics)
	}
	service, name := "unknown", "unknown"
	if s, n, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/"); ok {
		service, name = s, n
	}
	m := &methodMetrics{labels: [3]string{typ, service, name}, m: g}
	m.started = g.started.WithLabelValues(m.labels[:]...)
	m.received = g.received.WithLabelValues(m.labels[:]...)
	m.sent = g.sent.WithLabelValues(m.labels[:]...)
	m.handling = g.handling.WithLabelValues(m.labels[:]...)
	for code := range m.handled {
		m.handled[code] = g.handled.WithLabelValues(typ, service, name, codes.Code(code).String())
	}
	actual, _ := g.methods.LoadOrStore(fullMethod, m)
	return actual.(*methodMetrics)
}

// done counts a call that ended with err after took.
func (m *methodMetrics) done(err error, took time.Duration) {
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	code := st.Code()
	if int(code) < len(m.handled) {
		m.handled[code].Inc()
	} else {
		m.m.handled.WithLabelValues(m.labels[0], m.labels[1], m.labels[2], code.String()).Inc()
	}
	m.handling.Observe(took.Seconds())
}

func streamType(clientStreams, serverStreams bool) string {
	switch {
	case !clientStreams && !serverStreams:
		return grpcUnary
	case clientStreams && !serverStreams:
		return grpcClientStream
	case !clientStreams && serverStreams:
		return grpcServerStream
	}
	return grpcBidiStream
}

func (g *grpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	m := g.method(info.FullMethod, grpcUnary)
	m.started.Inc()
	m.received.Inc()
	resp, err := handler(ctx, req)
	m.sent.Inc()
	m.done(err, time.Since(start))
	return resp, err
}

func (g *grpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	m := g.method(info.FullMethod, streamType(info.IsClientStream, info.IsServerStream))
	m.started.Inc()
	err := handler(srv, &countedStream{ServerStream: ss, m: m})
	m.done(err, time.Since(start))
	return err
}

// countedStream counts a stream's messages.
type countedStream struct {
	grpc.ServerStream
	m *methodMetrics
}

func (s *countedStream) SendMsg(msg any) error {
	err := s.ServerStream.SendMsg(msg)
	s.m.sent.Inc()
	return err
}

func (s *countedStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	s.m.received.Inc()
	return err
}
