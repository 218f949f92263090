package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/etcdapi"
)

// Config is everything the command line sets.
type Config struct {
	DataDir    string
	EtcdListen string
	ZKListen   string
	HTTPListen string
	ID         uint64
	LogLevel   slog.Level

	// Ensemble. Peers are the voting members and Observers the non-voting
	// ones (ID → peer address, which that member listens on); every member
	// gets the same lists. PeerEtcd and PeerZK are the members' client
	// addresses, so that etcd MemberList and ZooKeeper srvr/conf can show
	// the whole ensemble; AdvertiseEtcd and AdvertiseZK override this
	// member's own (default: its listen addresses, or its entries there).
	Peers             map[uint64]string
	Observers         map[uint64]string
	PeerEtcd          map[uint64]string
	PeerZK            map[uint64]string
	AdvertiseEtcd     string
	AdvertiseZK       string
	ElectionTimeout   time.Duration
	HeartbeatInterval time.Duration
	MaxDiffEntries    int
	// Corruption checks (etcd's --corrupt-check-time and its
	// InitialCorruptCheck feature): 0 turns the periodic check off.
	CorruptCheckTime    time.Duration
	InitialCorruptCheck bool

	// etcd face
	MaxRequestBytes     int
	WatchProgressNotify time.Duration
	// etcd authentication: --auth-token, --auth-token-ttl, --bcrypt-cost.
	AuthToken    string
	AuthTokenTTL time.Duration
	BcryptCost   int
	// ZooKeeper face
	TickTime          time.Duration
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	FourLetterWords   string
	ReaperInterval    time.Duration
	MaxBuffer         int
	MaxClientConns    int
	MaxConns          int

	// applyFault is MemberConfig.ApplyFault, for tests that need a member
	// to stop as a failing disk would stop it; no flag sets it.
	applyFault func(index uint64) error
	// wrapBackend, if set, stands between the member and the faces, for
	// tests that need a state no flag makes (a raised alarm).
	wrapBackend func(core.Backend) core.Backend
}

// Addrs are the addresses a running node listens on.
type Addrs struct {
	Etcd, ZK, HTTP string
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("janus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.DataDir, "data-dir", "janus-data", "directory for the log and the state")
	fs.StringVar(&cfg.EtcdListen, "etcd-listen", "127.0.0.1:2379", "address for etcd v3 gRPC clients")
	fs.StringVar(&cfg.ZKListen, "zk-listen", "127.0.0.1:2181", "address for ZooKeeper clients")
	fs.StringVar(&cfg.HTTPListen, "http-listen", "127.0.0.1:8080", "address for /health, /livez, /readyz, the etcd JSON gateway (/v3/...), ZooKeeper admin commands (/commands/...) and /debug/pprof")
	fs.Uint64Var(&cfg.ID, "id", 1, "this member's ID in the ensemble")
	peers := fs.String("peers", "", "voting ensemble members as id=host:port,... (peer addresses, this member included; empty: a single member)")
	observers := fs.String("observers", "", "non-voting ensemble members as id=host:port,... (they receive commits and serve reads)")
	peerEtcd := fs.String("peer-etcd", "", "every member's etcd client address as id=host:port,... (shown by MemberList)")
	peerZK := fs.String("peer-zk", "", "every member's ZooKeeper client address as id=host:port,... (shown by srvr/conf)")
	fs.StringVar(&cfg.AdvertiseEtcd, "advertise-etcd", "", "etcd client address this member advertises (default: its --peer-etcd entry, else --etcd-listen)")
	fs.StringVar(&cfg.AdvertiseZK, "advertise-zk", "", "ZooKeeper client address this member advertises (default: its --peer-zk entry, else --zk-listen)")
	fs.DurationVar(&cfg.ElectionTimeout, "election-timeout", time.Second, "how long without a leader (or, on the leader, without a quorum) before an election")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", 100*time.Millisecond, "the leader's heartbeat period")
	fs.IntVar(&cfg.MaxDiffEntries, "max-diff-entries", 100_000, "a member missing more log entries than this is sent a snapshot instead")
	for _, name := range []string{"corrupt-check-time", "experimental-corrupt-check-time"} {
		fs.DurationVar(&cfg.CorruptCheckTime, name, 5*time.Minute, "how often the leader has every member hash its state at one log index and compare (0: never)")
	}
	for _, name := range []string{"initial-corrupt-check", "experimental-initial-corrupt-check"} {
		fs.BoolVar(&cfg.InitialCorruptCheck, name, true, "compare this member's state with the others' as soon as it starts")
	}
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", 1536*1024, "largest etcd request accepted, in bytes")
	fs.DurationVar(&cfg.WatchProgressNotify, "watch-progress-notify-interval", 10*time.Minute, "how often etcd watches with progress_notify get a progress notification")
	fs.StringVar(&cfg.AuthToken, "auth-token", "simple", "etcd auth token type: simple, or jwt,pub-key=FILE,priv-key=FILE,sign-method=METHOD[,ttl=DURATION]")
	fs.DurationVar(&cfg.AuthTokenTTL, "auth-token-ttl", etcdapi.DefaultTokenTTL, "how long a simple auth token stays valid")
	fs.IntVar(&cfg.BcryptCost, "bcrypt-cost", bcrypt.DefaultCost, "bcrypt cost of etcd user password hashes (4..31)")
	fs.DurationVar(&cfg.TickTime, "tick-time", 2*time.Second, "ZooKeeper tickTime: session timeouts default to 2x..20x of it")
	fs.DurationVar(&cfg.MinSessionTimeout, "min-session-timeout", 0, "smallest ZooKeeper session timeout granted (default 2x tick-time)")
	fs.DurationVar(&cfg.MaxSessionTimeout, "max-session-timeout", 0, "largest ZooKeeper session timeout granted (default 20x tick-time)")
	fs.StringVar(&cfg.FourLetterWords, "4lw-whitelist", "*", "four-letter words answered on the ZooKeeper port: * or a comma-separated list")
	fs.DurationVar(&cfg.ReaperInterval, "reaper-interval", time.Second, "how often empty containers and expired TTL znodes are removed")
	fs.IntVar(&cfg.MaxBuffer, "jute-maxbuffer", 0xfffff, "largest ZooKeeper packet accepted, in bytes")
	fs.IntVar(&cfg.MaxClientConns, "max-client-cnxns", 60, "most connections one client IP may hold on the ZooKeeper port, as ZooKeeper's maxClientCnxns (0: no limit)")
	fs.IntVar(&cfg.MaxConns, "max-cnxns", 0, "most connections the ZooKeeper port holds in all, as ZooKeeper's maxCnxns (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, fmt.Errorf("--log-level: %w", err)
	}
	if cfg.ID == 0 {
		return cfg, errors.New("--id must be at least 1")
	}
	for _, l := range []struct {
		flag, value string
		dst         *map[uint64]string
	}{{"peers", *peers, &cfg.Peers}, {"observers", *observers, &cfg.Observers}, {"peer-etcd", *peerEtcd, &cfg.PeerEtcd}, {"peer-zk", *peerZK, &cfg.PeerZK}} {
		m, err := parsePeers(l.value)
		if err != nil {
			return cfg, fmt.Errorf("--%s: %w", l.flag, err)
		}
		*l.dst = m
	}
	if err := checkEnsemble(cfg); err != nil {
		return cfg, err
	}
	if cfg.ElectionTimeout <= 0 || cfg.HeartbeatInterval <= 0 || cfg.HeartbeatInterval >= cfg.ElectionTimeout {
		return cfg, errors.New("--heartbeat-interval and --election-timeout must be positive, the heartbeat shorter")
	}
	if cfg.CorruptCheckTime < 0 {
		return cfg, errors.New("--corrupt-check-time must not be negative (0 turns the check off)")
	}
	if cfg.MaxDiffEntries <= 0 {
		return cfg, errors.New("--max-diff-entries must be positive")
	}
	if cfg.MaxRequestBytes <= 0 || cfg.MaxBuffer <= 0 {
		return cfg, errors.New("--max-request-bytes and --jute-maxbuffer must be positive")
	}
	if cfg.MaxClientConns < 0 || cfg.MaxConns < 0 {
		return cfg, errors.New("--max-client-cnxns and --max-cnxns must be 0 (no limit) or positive")
	}
	if cfg.TickTime <= 0 {
		return cfg, errors.New("--tick-time must be positive")
	}
	if cfg.BcryptCost < bcrypt.MinCost || cfg.BcryptCost > bcrypt.MaxCost {
		return cfg, fmt.Errorf("--bcrypt-cost must be in %d..%d", bcrypt.MinCost, bcrypt.MaxCost)
	}
	if _, err := etcdapi.NewTokenProvider(cfg.AuthToken, cfg.AuthTokenTTL); err != nil {
		return cfg, fmt.Errorf("--auth-token: %w", err)
	}
	return cfg, nil
}

// checkEnsemble refuses ensemble flags that cannot describe one ensemble.
func checkEnsemble(cfg Config) error {
	if len(cfg.Peers) == 0 {
		if len(cfg.Observers) > 0 {
			return errors.New("--observers needs --peers: observers follow a voting ensemble")
		}
		return nil
	}
	for id := range cfg.Observers {
		if _, both := cfg.Peers[id]; both {
			return fmt.Errorf("member %d is in both --peers and --observers", id)
		}
	}
	_, voter := cfg.Peers[cfg.ID]
	_, observer := cfg.Observers[cfg.ID]
	if !voter && !observer {
		return fmt.Errorf("--id %d is in neither --peers nor --observers", cfg.ID)
	}
	for flag, m := range map[string]map[uint64]string{"--peer-etcd": cfg.PeerEtcd, "--peer-zk": cfg.PeerZK} {
		for id := range m {
			_, v := cfg.Peers[id]
			_, o := cfg.Observers[id]
			if !v && !o {
				return fmt.Errorf("%s names member %d, which is not in --peers or --observers", flag, id)
			}
		}
	}
	return nil
}

func parsePeers(s string) (map[uint64]string, error) {
	peers := map[uint64]string{}
	if s == "" {
		return peers, nil
	}
	for _, part := range strings.Split(s, ",") {
		idStr, addr, ok := strings.Cut(part, "=")
		if !ok || addr == "" {
			return nil, fmt.Errorf("%q is not id=host:port", part)
		}
		id, err := strconv.ParseUint(idStr, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%q: the id must be a positive number", part)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("id %d appears twice", id)
		}
		peers[id] = addr
	}
	return peers, nil
}
