package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/accept"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zkapi"
)

// node is one running server: a member and the listeners of both faces.
type node struct {
	log    *slog.Logger
	member *server.Member
	etcd   *etcdapi.Server
	zk     *zkapi.Server
	http   *http.Server
	addrs  Addrs
	served chan error
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
	// Listen first: a port in use should fail before the data dir is touched.
	var listeners []net.Listener
	defer func() {
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
		}
	}()
	var ls [3]net.Listener
	for i, spec := range []struct{ what, addr string }{{"etcd", cfg.EtcdListen}, {"zk", cfg.ZKListen}, {"http", cfg.HTTPListen}} {
		l, err := listen(spec.what, spec.addr)
		if err != nil {
			return nil, err
		}
		ls[i] = l
		listeners = append(listeners, l)
	}
	addrs := Addrs{Etcd: ls[0].Addr().String(), ZK: ls[1].Addr().String(), HTTP: ls[2].Addr().String()}

	etcdAddr := firstOf(cfg.AdvertiseEtcd, cfg.PeerEtcd[cfg.ID], addrs.Etcd)
	zkAddr := firstOf(cfg.AdvertiseZK, cfg.PeerZK[cfg.ID], addrs.ZK)
	clients := map[uint64]server.ClientAddrs{}
	for id, a := range cfg.PeerEtcd {
		c := clients[id]
		c.EtcdURL = "http://" + a
		clients[id] = c
	}
	for id, a := range cfg.PeerZK {
		c := clients[id]
		c.ZKAddr = a
		clients[id] = c
	}
	tokens, err := etcdapi.NewTokenProvider(cfg.AuthToken, cfg.AuthTokenTTL)
	if err != nil {
		return nil, fmt.Errorf("--auth-token: %w", err)
	}
	member, err := server.OpenMember(server.MemberConfig{
		DataDir:              cfg.DataDir,
		Logger:               logger,
		ID:                   cfg.ID,
		EtcdURL:              "http://" + etcdAddr,
		ZKAddr:               zkAddr,
		Peers:                cfg.Peers,
		Observers:            cfg.Observers,
		Clients:              clients,
		ElectionTimeout:      cfg.ElectionTimeout,
		HeartbeatInterval:    cfg.HeartbeatInterval,
		MaxDiffEntries:       cfg.MaxDiffEntries,
		ApplyFault:           cfg.applyFault,
		CorruptCheckInterval: cfg.CorruptCheckTime,
		InitialCorruptCheck:  cfg.InitialCorruptCheck,
	})
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	n = &node{log: logger, member: member, addrs: addrs, served: make(chan error, 3)}
	var backend core.Backend = member
	if cfg.wrapBackend != nil {
		backend = cfg.wrapBackend(member)
	}
	n.etcd = etcdapi.New(backend, etcdapi.Config{
		Logger:                 logger.With("face", "etcd"),
		MaxRequestBytes:        cfg.MaxRequestBytes,
		ProgressNotifyInterval: cfg.WatchProgressNotify,
		Tokens:                 tokens,
		BcryptCost:             cfg.BcryptCost,
	})
	n.zk = zkapi.New(backend, zkapi.Config{
		Logger:              logger.With("face", "zookeeper"),
		TickTime:            cfg.TickTime,
		MinSessionTimeout:   cfg.MinSessionTimeout,
		MaxSessionTimeout:   cfg.MaxSessionTimeout,
		FourLetterWhitelist: splitList(cfg.FourLetterWords),
		ReaperInterval:      cfg.ReaperInterval,
		MaxBuffer:           cfg.MaxBuffer,
		MaxClientConns:      cfg.MaxClientConns,
		MaxConns:            cfg.MaxConns,
	})
	mux := http.NewServeMux()
	health := &healthChecks{b: backend, log: logger.With("face", "http"), timeout: healthTimeout(cfg)}
	health.register(mux)
	mux.Handle("/v3/", n.etcd.GatewayHandler())
	mux.Handle("/commands/", n.zk.AdminHandler())
	mux.Handle("/commands", n.zk.AdminHandler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	n.http = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		ErrorLog:          slog.NewLogLogger(logger.With("face", "http").Handler(), slog.LevelDebug),
	}

	// Both faces ride out temporary accept errors themselves; net/http
	// would too, but logs each retry: this logs a burst once.
	httpL := accept.Patient(ls[2], logger.With("face", "http"))
	go func() { n.served <- n.etcd.Serve(ls[0]) }()
	go func() { n.served <- n.zk.Serve(ls[1]) }()
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

func splitList(s string) []string {
	if s == "" || s == "*" {
		return nil
	}
	var out []string
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
	errHTTP := n.http.Shutdown(ctx)
	return errors.Join(errHTTP, n.member.Close())
}
