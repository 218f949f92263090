package etcdapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	etcdgw "go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	electiongw "go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb/gw"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	lockgw "go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb/gw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	"golang.org/x/crypto/bcrypt"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/accept"
)

// Defaults, as etcd v3.7 has them.
const (
	DefaultMaxRequestBytes        = 1536 * 1024
	DefaultMaxTxnOps              = 128
	DefaultProgressNotifyInterval = 10 * time.Minute
	// DefaultVersion is the etcd version Status reports. Clients gate
	// features on it (Kubernetes wants >= 3.4.31 and not 3.5.0-3.5.12 for
	// RequestProgress), so it names the etcd release whose behaviour this
	// package matches rather than a Janus version.
	DefaultVersion = "3.7.3"
	// grpcOverheadBytes lets a request slightly over the limit reach the
	// application check, which answers it with etcd's own error rather
	// than gRPC's.
	grpcOverheadBytes = 512 * 1024
)

// Config tunes a Server. Zero values take the defaults.
type Config struct {
	Logger *slog.Logger
	// MaxRequestBytes bounds the encoded size of a write request.
	MaxRequestBytes int
	// MaxTxnOps bounds the ops of one Txn branch.
	MaxTxnOps int
	// ClusterName is reported nowhere yet but kept for member names.
	ClusterName string
	// MemberName is the name MemberList reports for this member when the
	// backend gives none.
	MemberName string
	// ProgressNotifyInterval is how often watchers that asked for progress
	// notifications get one while idle.
	ProgressNotifyInterval time.Duration
	// Version is the etcd server version Status reports.
	Version string
	// Metrics, if set, receives the gRPC server's metrics (etcd's
	// grpc_server_handled_total and friends, labelled by service, method
	// and code).
	Metrics prometheus.Registerer
	// HTTPHandler, if set, answers the HTTP/1.x requests that arrive on
	// the client port, as etcd serves /metrics and /health there next to
	// gRPC (etcdctl check datascale reads the client URL's /metrics).
	HTTPHandler http.Handler
	// Tokens issues and reads auth tokens (etcd's --auth-token); nil
	// means simple tokens with DefaultTokenTTL.
	Tokens TokenProvider
	// BcryptCost is the bcrypt cost of password hashes (etcd's
	// --bcrypt-cost); 0 means bcrypt's default, 10.
	BcryptCost int
	// ClientCertAuth makes the common name of a verified client
	// certificate the user of a request that carries no token (etcd's
	// --client-cert-auth).
	ClientCertAuth bool

	// watchQueueLen bounds the revisions a watch stream may have waiting
	// before it reads from history instead (0: streamQueueLen). Tests
	// shrink it to make streams fall behind.
	watchQueueLen int
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxTxnOps <= 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.ProgressNotifyInterval <= 0 {
		c.ProgressNotifyInterval = DefaultProgressNotifyInterval
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.MemberName == "" {
		c.MemberName = "janus"
	}
	if c.Tokens == nil {
		c.Tokens = newSimpleTokens(DefaultTokenTTL)
	}
	if c.BcryptCost == 0 {
		c.BcryptCost = bcrypt.DefaultCost
	}
	return c
}

// Server is the etcd v3 API of one member.
type Server struct {
	b      core.Backend
	cfg    Config
	log    *slog.Logger
	tokens TokenProvider

	grpc *grpc.Server

	// inner is an in-process connection to grpc, for the JSON gateway
	// and the lock and election services, which etcd also builds as
	// clients of its own API.
	inner     *bufconn.Listener
	innerConn *grpc.ClientConn
	innerDone chan struct{}

	ctx    context.Context // ends when the server stops
	cancel context.CancelFunc

	stopOnce   sync.Once
	lockSvc    *lockServer
	health     *healthServer
	healthDone chan struct{} // closed when health.follow has returned

	watchStats   watchStats
	watchFan     watchFan
	leaseClients leaseClients

	mu          sync.Mutex
	addrs       []string       // client URLs of the listeners served
	httpServers []*http.Server // serving HTTP/1.x on the client port (serveSplit)
	cached      core.Status
	statusAt    time.Time
}

// streamWorkers is the size of the gRPC server's handler pool: enough for
// a few hundred concurrent calls, each idle worker costing a small stack.
const streamWorkers = 256

// New returns a Server for b. It starts serving on listeners passed to
// Serve; Stop ends it.
func New(b core.Backend, cfg Config) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		b: b, cfg: cfg, log: cfg.Logger.With("face", "etcd"), tokens: cfg.Tokens,
		ctx: ctx, cancel: cancel,
		inner:     bufconn.Listen(1 << 20),
		innerDone: make(chan struct{}),
	}
	opts := []grpc.ServerOption{
		grpc.Creds(listenerCreds{}),
		grpc.MaxRecvMsgSize(cfg.MaxRequestBytes + grpcOverheadBytes),
		grpc.MaxSendMsgSize(1<<31 - 1),
		grpc.MaxConcurrentStreams(1<<32 - 1),
		// Unary handlers block for a commit, so many run at once; a pool
		// of long-lived workers serves them on stacks that have already
		// grown, instead of a fresh goroutine growing its stack per call
		// (6% of the server's CPU in a put profile). Calls beyond the
		// pool still get a goroutine of their own.
		grpc.NumStreamWorkers(streamWorkers),
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(s.slowRequests))
	var grpcMetrics *grpcMetrics
	if cfg.Metrics != nil {
		// The handling-time histogram is what etcd's etcdGRPCRequestsSlow
		// alert reads (etcd exports it with --metrics=extensive).
		grpcMetrics = newGRPCMetrics()
		opts = append(opts,
			grpc.ChainUnaryInterceptor(grpcMetrics.unary),
			grpc.ChainStreamInterceptor(grpcMetrics.stream))
	}
	s.grpc = grpc.NewServer(opts...)
	pb.RegisterKVServer(s.grpc, &kvServer{s: s})
	pb.RegisterWatchServer(s.grpc, &watchServer{s: s})
	pb.RegisterLeaseServer(s.grpc, &leaseServer{s: s})
	pb.RegisterClusterServer(s.grpc, &clusterServer{s: s})
	pb.RegisterMaintenanceServer(s.grpc, &maintenanceServer{s: s})
	pb.RegisterAuthServer(s.grpc, &authServer{s: s})
	s.health = newHealthServer(s)
	healthpb.RegisterHealthServer(s.grpc, s.health)

	conn, err := grpc.NewClient("passthrough:///janus-inner",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.inner.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1), grpc.MaxCallSendMsgSize(1<<31-1)),
		grpc.WithUnaryInterceptor(forwardTokenUnary),
		grpc.WithStreamInterceptor(forwardTokenStream),
	)
	if err != nil {
		// NewClient only fails on malformed options, which are fixed
		// above.
		panic(fmt.Sprintf("etcdapi: inner client: %v", err))
	}
	s.innerConn = conn
	s.lockSvc = &lockServer{s: s}
	s.lockSvc.inner.s = s
	v3lockpb.RegisterLockServer(s.grpc, s.lockSvc)
	v3electionpb.RegisterElectionServer(s.grpc, &electionServer{s: s})

	if grpcMetrics != nil {
		// Every method starts at zero, as etcd's grpc_prometheus.Register
		// does, so rates exist before the first call.
		grpcMetrics.initialize(s.grpc)
		cfg.Metrics.MustRegister(grpcMetrics)
	}
	s.healthDone = make(chan struct{})
	go func() {
		defer close(s.healthDone)
		s.health.follow(s.ctx)
	}()
	go func() {
		defer close(s.innerDone)
		if err := s.grpc.Serve(s.inner); err != nil {
			s.log.Debug("inner listener ended", "err", err)
		}
	}()
	return s
}

// Serve answers etcd clients on l until Stop. It may be called for several
// listeners.
func (s *Server) Serve(l net.Listener) error {
	return s.serve(l, "http://")
}

// ServeTLS answers etcd clients over TLS on l, as Serve does; cfg must
// offer ALPN "h2", which gRPC clients insist on. A client certificate
// reaches the handlers as credentials.TLSInfo.
func (s *Server) ServeTLS(l net.Listener, cfg *tls.Config) error {
	return s.serve(tls.NewListener(l, cfg), "https://")
}

func (s *Server) serve(l net.Listener, scheme string) error {
	s.mu.Lock()
	s.addrs = append(s.addrs, scheme+l.Addr().String())
	s.mu.Unlock()
	// grpc-go rides out temporary accept errors too, but logs each
	// retry: this logs a burst once, as the ZooKeeper face does.
	l = accept.Patient(l, s.log)
	if s.cfg.HTTPHandler != nil {
		return s.serveSplit(l)
	}
	if err := s.grpc.Serve(l); err != nil {
		return fmt.Errorf("etcdapi: serve %s: %w", l.Addr(), err)
	}
	return nil
}

// GRPCServer exposes the gRPC server, for a caller that multiplexes it with
// other handlers on one port.
func (s *Server) GRPCServer() *grpc.Server { return s.grpc }

// GatewayHandler returns etcd's JSON gateway (POST /v3/kv/range, /v3/watch,
// /v3/lease/grant, ...), answering through this server.
func (s *Server) GatewayHandler() http.Handler {
	mux := gwruntime.NewServeMux(
		gwruntime.WithMarshalerOption(gwruntime.MIMEWildcard, &gwruntime.HTTPBodyMarshaler{
			Marshaler: &gwruntime.JSONPb{
				MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
				UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
			},
		}),
	)
	for _, register := range []func(context.Context, *gwruntime.ServeMux, *grpc.ClientConn) error{
		etcdgw.RegisterKVHandler,
		etcdgw.RegisterWatchHandler,
		etcdgw.RegisterLeaseHandler,
		etcdgw.RegisterClusterHandler,
		etcdgw.RegisterMaintenanceHandler,
		etcdgw.RegisterAuthHandler,
		lockgw.RegisterLockHandler,
		electiongw.RegisterElectionHandler,
	} {
		if err := register(s.ctx, mux, s.innerConn); err != nil {
			// Registration only fails on a nil connection.
			panic(fmt.Sprintf("etcdapi: gateway: %v", err))
		}
	}
	return limitBody(mux, 2*int64(s.cfg.MaxRequestBytes+grpcOverheadBytes))
}

// limitBody bounds the JSON bodies the gateway reads into memory. etcd's
// gateway has no limit of its own: it reads any body whole, and only its
// gRPC server refuses the message then (MaxRequestBytes plus the gRPC
// overhead), with ResourceExhausted, which the gateway sends as a 429. A
// JSON body is larger than its message (bytes travel as base64, 4/3 of
// their size), so limit is twice the gRPC limit: every body etcd would
// pass on still gets etcd's answer from the gRPC server, and a larger one
// gets the same answer before it is read. Streams (watch, lease
// keep-alive) carry one message after another in their body, so only
// their declared length is checked.
func limitBody(mux *gwruntime.ServeMux, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			_, out := gwruntime.MarshalerForRequest(mux, r)
			err := status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", r.ContentLength, limit)
			gwruntime.HTTPError(r.Context(), mux, out, w, r, err)
			return
		}
		if streamPaths[r.URL.Path] {
			// A stream's body lasts as long as the stream: the HTTP
			// server's read timeout is for whole requests.
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		} else {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		mux.ServeHTTP(w, r)
	})
}

// streamPaths are the gateway's client-streaming calls.
var streamPaths = map[string]bool{"/v3/watch": true, "/v3/lease/keepalive": true}

// Stop ends every stream and listener and waits for the handlers to return.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		<-s.healthDone
		s.lockSvc.close()
		s.grpc.Stop()
		s.mu.Lock()
		for _, hs := range s.httpServers {
			hs.Close()
		}
		s.mu.Unlock()
		s.innerConn.Close()
		<-s.innerDone
		s.watchFan.wait()
	})
}

// header returns a response header at revision rev.
func (s *Server) header(rev int64) *pb.ResponseHeader {
	st := s.status()
	return &pb.ResponseHeader{ClusterId: st.ClusterID, MemberId: st.MemberID, RaftTerm: st.Epoch, Revision: rev}
}

// statusMaxAge bounds how stale the term in a header may be. Backend
// Status measures the store on disk, far too slow to call for every
// response.
const statusMaxAge = 50 * time.Millisecond

// status returns a recent Status for headers: the identity and term.
func (s *Server) status() core.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); s.statusAt.IsZero() || now.Sub(s.statusAt) > statusMaxAge {
		s.cached, s.statusAt = s.b.Status(), now
	}
	return s.cached
}

// currentRev is the store's latest applied revision.
func (s *Server) currentRev() int64 {
	rev, err := s.b.Rev()
	if err != nil {
		return s.b.Status().Rev
	}
	return rev
}

// clientURLs are the URLs this member serves etcd clients on.
func (s *Server) clientURLs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.addrs...)
}
