package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/januskv/janus/console"
	"github.com/januskv/janus/core"
	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/accept"
	"github.com/januskv/janus/internal/httpguard"
	"github.com/januskv/janus/internal/metrics"
	"github.com/januskv/janus/internal/tlsfiles"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zab"
	"github.com/januskv/janus/zkapi"
)

// node is one running server: a member and the listeners of both faces.
type node struct {
	log    *slog.Logger
	member *server.Member
	etcd   *etcdapi.Server
	zk     *zkapi.Server
	http   *http.Server
	// console is the web console on the HTTP port (/ui/).
	console *console.Console
	// metricsHTTP serve /metrics and health on --listen-metrics-urls.
	metricsHTTP []*http.Server
	addrs       Addrs
	served      chan error
}

// tlsOptions are the flags' options for one side's certificates.
func tlsOptions(cfg Config, clientCertAuth, selfSigned bool) tlsfiles.Options {
	return tlsfiles.Options{
		ClientCertAuth: clientCertAuth,
		CipherSuites:   cfg.CipherSuites,
		MinVersion:     cfg.TLSMinVersion,
		MaxVersion:     cfg.TLSMaxVersion,
		SelfSigned:     selfSigned,
	}
}

// clientSources loads the client ports' certificates (nil: plaintext),
// making the self-signed one first under --auto-tls, and the HTTP port's:
// its own with --http-cert-file, else the client ports'.
func clientSources(cfg Config, logger *slog.Logger) (client, httpPort *tlsfiles.Source, err error) {
	files := cfg.ClientTLS.Files
	auto := cfg.AutoTLS && !cfg.ClientTLS.Enabled()
	if cfg.AutoTLS && !auto {
		logger.Warn("ignoring --auto-tls since --cert-file is given")
	}
	if auto {
		hosts := []string{cfg.EtcdListen, cfg.ZKSecureListen, cfg.HTTPListen, cfg.AdvertiseEtcd, cfg.AdvertiseZK}
		self, err := tlsfiles.SelfCert(filepath.Join(cfg.DataDir, "fixtures", "client"), hosts, logger.With("tls", "client"))
		if err != nil {
			return nil, nil, fmt.Errorf("--auto-tls: %w", err)
		}
		self.CRL = files.CRL
		files = self
	}
	if files.Enabled() {
		client, err = tlsfiles.New(files, tlsOptions(cfg, cfg.ClientTLS.ClientCertAuth, auto), logger.With("tls", "client"))
		if err != nil {
			return nil, nil, fmt.Errorf("client TLS: %w", err)
		}
	}
	httpPort = client
	if cfg.HTTPTLS.Enabled() {
		httpPort, err = tlsfiles.New(cfg.HTTPTLS.Files, tlsOptions(cfg, cfg.HTTPTLS.ClientCertAuth, false), logger.With("tls", "http"))
		if err != nil {
			return nil, nil, fmt.Errorf("HTTP TLS: %w", err)
		}
	}
	return client, httpPort, nil
}

// peerSource is the zab transport's TLS (nil: plaintext): the peer
// certificate flags, or under --peer-auto-tls a self-signed certificate
// that encrypts but authenticates no member.
func peerSource(cfg Config, logger *slog.Logger) (*zab.PeerTLS, error) {
	log := logger.With("tls", "peer")
	files := cfg.PeerTLS.Files
	auto := cfg.PeerAutoTLS && !cfg.PeerTLS.Enabled()
	if cfg.PeerAutoTLS && !auto {
		log.Warn("ignoring --peer-auto-tls since --peer-cert-file is given")
	}
	if auto {
		hosts := []string{cfg.Peers[cfg.ID], cfg.Observers[cfg.ID], zab.PeerCertName(cfg.ID)}
		self, err := tlsfiles.SelfCert(filepath.Join(cfg.DataDir, "fixtures", "peer"), hosts, log)
		if err != nil {
			return nil, fmt.Errorf("--peer-auto-tls: %w", err)
		}
		self.CRL = files.CRL
		files = self
		log.Warn("--peer-auto-tls: peer traffic is encrypted, but members are not authenticated: any host that reaches the peer port is trusted on the member ID it claims")
	}
	if !files.Enabled() {
		return nil, nil
	}
	src, err := tlsfiles.New(files, tlsOptions(cfg, !auto, auto), log)
	if err != nil {
		return nil, fmt.Errorf("peer TLS: %w", err)
	}
	return &zab.PeerTLS{Server: src.ServerConfig(), Client: src.ClientConfig, Unauthenticated: auto}, nil
}

// listen opens a TCP listener with a one-line error a person can act on.
func listen(what, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%s address %s is already in use (is another server running? choose another with --%s-listen)", what, addr, what)
		}
		return nil, fmt.Errorf("%s listener on %s: %w", what, addr, err)
	}
	return l, nil
}

func startNode(cfg Config, logger *slog.Logger) (n *node, err error) {
	// Certificates first: a wrong path should fail before anything starts.
	clientTLS, httpTLS, err := clientSources(cfg, logger)
	if err != nil {
		return nil, err
	}
	zabTLS, err := peerSource(cfg, logger)
	if err != nil {
		return nil, err
	}

	// Listen next: a port in use should fail before the data dir is touched.
	var listeners []net.Listener
	defer func() {
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
		}
	}()
	// ls holds the etcd, ZooKeeper, ZooKeeper TLS and HTTP listeners; an
	// address left empty leaves its port off.
	var ls [4]net.Listener
	var bound [4]string
	for i, spec := range []struct{ what, addr string }{{"etcd", cfg.EtcdListen}, {"zk", cfg.ZKListen}, {"zk-secure", cfg.ZKSecureListen}, {"http", cfg.HTTPListen}} {
		if spec.addr == "" && (spec.what == "zk" || spec.what == "zk-secure") {
			continue
		}
		l, err := listen(spec.what, spec.addr)
		if err != nil {
			return nil, err
		}
		ls[i], bound[i] = l, l.Addr().String()
		listeners = append(listeners, l)
	}
	addrs := Addrs{Etcd: bound[0], ZK: bound[1], ZKSecure: bound[2], HTTP: bound[3]}
	var metricsLs []net.Listener
	for _, addr := range cfg.MetricsListen {
		l, err := listen("metrics", addr)
		if err != nil {
			return nil, err
		}
		metricsLs = append(metricsLs, l)
		listeners = append(listeners, l)
		addrs.Metrics = append(addrs.Metrics, l.Addr().String())
	}

	scheme := "http://"
	if clientTLS != nil {
		scheme = "https://"
	}
	etcdAddr := firstOf(cfg.AdvertiseEtcd, cfg.PeerEtcd[cfg.ID], addrs.Etcd)
	zkAddr := firstOf(cfg.AdvertiseZK, cfg.PeerZK[cfg.ID], addrs.ZK, addrs.ZKSecure)
	clients := map[uint64]server.ClientAddrs{}
	for id, a := range cfg.PeerEtcd {
		c := clients[id]
		c.EtcdURL = scheme + a
		clients[id] = c
	}
	for id, a := range cfg.PeerZK {
		c := clients[id]
		c.ZKAddr = a
		clients[id] = c
	}
	for id, a := range cfg.PeerZKElection {
		c := clients[id]
		c.ZKElectionAddr = a
		clients[id] = c
	}
	tokens, err := etcdapi.NewTokenProvider(cfg.AuthToken, cfg.AuthTokenTTL)
	if err != nil {
		return nil, fmt.Errorf("--auth-token: %w", err)
	}
	reg := metrics.New()
	member, err := server.OpenMember(server.MemberConfig{
		DataDir:              cfg.DataDir,
		Logger:               logger,
		ID:                   cfg.ID,
		EtcdURL:              scheme + etcdAddr,
		ZKAddr:               zkAddr,
		Peers:                cfg.Peers,
		Observers:            cfg.Observers,
		Join:                 cfg.Join,
		PeerTLS:              zabTLS,
		Clients:              clients,
		ElectionTimeout:      cfg.ElectionTimeout,
		HeartbeatInterval:    cfg.HeartbeatInterval,
		MaxDiffEntries:       cfg.MaxDiffEntries,
		ApplyFault:           cfg.applyFault,
		CorruptCheckInterval: cfg.CorruptCheckTime,
		InitialCorruptCheck:  cfg.InitialCorruptCheck,
		SpaceReserve:         cfg.SpaceReserve,
		Observer:             reg,
		QuotaBackendBytes:    cfg.QuotaBackendBytes,
		AutoCompaction:       cfg.AutoCompaction,
		ReaperInterval:       cfg.ReaperInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	n = &node{log: logger, member: member, addrs: addrs, served: make(chan error, 4+len(metricsLs))}
	var backend core.Backend = member
	if cfg.wrapBackend != nil {
		backend = cfg.wrapBackend(member)
	}
	health := &healthChecks{b: backend, log: logger.With("face", "http"), timeout: healthTimeout(cfg)}
	// What etcd serves next to gRPC on its client port and on
	// --listen-metrics-urls: /metrics and the health endpoints.
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", reg.Handler())
	health.register(metricsMux)
	n.etcd = etcdapi.New(backend, etcdapi.Config{
		Logger:                 logger.With("face", "etcd"),
		MaxRequestBytes:        cfg.MaxRequestBytes,
		ProgressNotifyInterval: cfg.WatchProgressNotify,
		Metrics:                reg.Registerer(),
		HTTPHandler:            metricsMux,
		Tokens:                 tokens,
		BcryptCost:             cfg.BcryptCost,
		ClientCertAuth:         cfg.ClientTLS.ClientCertAuth,
	})
	n.zk = zkapi.New(backend, zkapi.Config{
		Logger:               logger.With("face", "zookeeper"),
		TickTime:             cfg.TickTime,
		MinSessionTimeout:    cfg.MinSessionTimeout,
		MaxSessionTimeout:    cfg.MaxSessionTimeout,
		FourLetterWhitelist:  splitList(cfg.FourLetterWords),
		ReaperInterval:       cfg.ReaperInterval,
		MaxBuffer:            cfg.MaxBuffer,
		MaxClientConns:       cfg.MaxClientConns,
		MaxConns:             cfg.MaxConns,
		DisableExtendedTypes: cfg.DisableExtendedTypes,
		EnforceQuota:         cfg.EnforceQuota,
		ReconfigEnabled:      cfg.ZKReconfigEnabled,
		Dirs:                 member.Dirs,
		RootToken:            n.etcd.RootToken,
		SuperDigest:          cfg.ZKSuperDigest,
		X509SuperUser:        cfg.ZKX509SuperUser,
		SASLUsers:            cfg.ZKSASLUsers,
		SASLSuperUser:        cfg.ZKSASLSuperUser,
		EnforceAuthSchemes:   cfg.ZKEnforceAuthSchemes,
	})
	reg.WatchMember(member, metrics.MemberOptions{Version: etcdapi.DefaultVersion})
	reg.WatchZooKeeper(n.zk)
	reg.WatchEtcdWatches(n.etcd.WatchStats)
	reg.WatchCrossProtocol(n.etcd.CrossProtocolEvents, n.zk.CrossProtocolEvents)
	mux := http.NewServeMux()
	health.register(mux)
	mux.Handle("/metrics", reg.Handler())
	mux.Handle("/v3/", n.etcd.GatewayHandler())
	mux.Handle("/commands/", n.zk.AdminHandler())
	mux.Handle("/commands", n.zk.AdminHandler())
	n.console = console.New(console.Config{
		Backend:      backend,
		Logger:       logger.With("face", "console"),
		TokenUser:    n.etcd.TokenUser,
		SessionAddrs: n.zk.SessionAddrs,
		LeaseClient:  n.etcd.LeaseClient,
		Dial:         memberDialer(clientTLS, logger),
	})
	n.console.Register(mux)
	if cfg.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	n.http = &http.Server{
		Handler: httpguard.Wrap(mux, httpguard.Config{
			HostWhitelist: cfg.HostWhitelist,
			ListenAddr:    cfg.HTTPListen,
			CORS:          cfg.CORS,
			JSONPrefix:    "/v3/",
			Logger:        logger.With("face", "http"),
		}),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		ErrorLog:          slog.NewLogLogger(logger.With("face", "http").Handler(), slog.LevelDebug),
	}

	// Both faces ride out temporary accept errors themselves; net/http
	// would too, but logs each retry: this logs a burst once.
	var httpInner net.Listener = ls[3]
	if httpTLS != nil {
		httpInner = tls.NewListener(httpInner, httpTLS.ServerConfig("h2", "http/1.1"))
	}
	httpL := accept.Patient(httpInner, logger.With("face", "http"))
	if clientTLS != nil {
		// h2 is gRPC; http/1.1 is /metrics and health, as on a plaintext port.
		go func() { n.served <- n.etcd.ServeTLS(ls[0], clientTLS.ServerConfig("h2", "http/1.1")) }()
	} else {
		go func() { n.served <- n.etcd.Serve(ls[0]) }()
	}
	if ls[1] != nil {
		go func() { n.served <- n.zk.Serve(ls[1]) }()
	}
	if ls[2] != nil {
		go func() { n.served <- n.zk.Serve(tls.NewListener(ls[2], clientTLS.ServerConfig())) }()
	}
	for _, l := range metricsLs {
		hs := &http.Server{
			Handler:           metricsMux,
			ReadHeaderTimeout: httpReadHeaderTimeout,
			ReadTimeout:       httpReadTimeout,
			ErrorLog:          slog.NewLogLogger(logger.With("face", "metrics").Handler(), slog.LevelDebug),
		}
		n.metricsHTTP = append(n.metricsHTTP, hs)
		l := accept.Patient(l, logger.With("face", "metrics"))
		go func() {
			err := hs.Serve(l)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			n.served <- err
		}()
	}
	go func() {
		err := n.http.Serve(httpL)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		n.served <- err
	}()
	return n, nil
}

// firstOf returns the first non-empty string.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// splitList splits a comma-separated flag value; "" gives an empty,
// non-nil list (so an empty 4lw whitelist serves none, not every word).
func splitList(s string) []string {
	out := []string{}
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// HTTP server timeouts. A request's headers must arrive within
// httpReadHeaderTimeout and its body within httpReadTimeout, so a client
// that sends slowly cannot hold a connection and its buffers forever.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = time.Minute
)

// healthTimeout bounds a health check's read as etcd's request timeout
// does: 5s plus two election timeouts.
func healthTimeout(cfg Config) time.Duration {
	return 5*time.Second + 2*cfg.ElectionTimeout
}

// Close stops the listeners, then the member.
func (n *node) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.etcd.Stop()
	n.zk.Close()
	n.console.Close()
	errs := []error{n.http.Shutdown(ctx)}
	for _, hs := range n.metricsHTTP {
		errs = append(errs, hs.Shutdown(ctx))
	}
	errs = append(errs, n.member.Close())
	return errors.Join(errs...)
}
