package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/etcdapi"
	"github.com/januskv/janus/internal/tlsfiles"
	"github.com/januskv/janus/server"
	"github.com/januskv/janus/zab"
	"github.com/januskv/janus/zkapi"
)

// Config is everything the command line sets.
type Config struct {
	DataDir    string
	EtcdListen string
	ZKListen   string
	HTTPListen string
	// MetricsListen are extra addresses serving only /metrics and the
	// health endpoints (etcd's --listen-metrics-urls).
	MetricsListen []string
	ID            uint64
	LogLevel      slog.Level
	LogFormat     string // json or text

	// Ensemble. Peers are the voting members and Observers the non-voting
	// ones (ID → peer address, which that member listens on); every member
	// gets the same lists. PeerEtcd and PeerZK are the members' client
	// addresses, so that etcd MemberList and ZooKeeper srvr/conf can show
	// the whole ensemble; AdvertiseEtcd and AdvertiseZK override this
	// member's own (default: its listen addresses, or its entries there).
	Peers             map[uint64]string
	Observers         map[uint64]string
	Join              bool // --initial-cluster-state existing: join the running ensemble Peers and Observers locate (zab.Config.Join)
	PeerEtcd          map[uint64]string
	PeerZK            map[uint64]string
	PeerZKElection    map[uint64]string // ZooKeeper election addresses, only shown back (/zookeeper/config)
	AdvertiseEtcd     string
	AdvertiseZK       string
	ElectionTimeout   time.Duration
	HeartbeatInterval time.Duration
	MaxDiffEntries    int
	// Corruption checks (etcd's --corrupt-check-time and its
	// InitialCorruptCheck feature): 0 turns the periodic check off.
	CorruptCheckTime    time.Duration
	InitialCorruptCheck bool
	// SpaceReserve is the free space the data directory keeps (see
	// server.MemberConfig.SpaceReserve).
	SpaceReserve int64
	// Space (etcd's --quota-backend-bytes, --auto-compaction-mode and
	// --auto-compaction-retention).
	QuotaBackendBytes int64
	AutoCompaction    server.AutoCompaction

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
	// ZKSecureListen is the ZooKeeper face's TLS port (ZooKeeper's
	// secureClientPort); it uses the client certificate flags.
	ZKSecureListen string
	// ZooKeeper authentication beyond digest and ip: the super digest,
	// the x509 and SASL super users, the SASL DIGEST-MD5 users (read from
	// --zk-sasl-jaas-file) and the schemes every session must use.
	ZKSuperDigest        string
	ZKX509SuperUser      string
	ZKSASLUsers          map[string]string
	ZKSASLSuperUser      string
	ZKEnforceAuthSchemes []string

	// Client TLS (etcd's flags): the etcd port, the ZooKeeper secure port
	// and the HTTP port. Peer TLS: the zab transport. HTTPTLS, when its
	// certificate is set, is the HTTP port's own (else it uses ClientTLS).
	ClientTLS, PeerTLS, HTTPTLS tlsFlags
	// AutoTLS serves the client ports with a self-signed certificate made
	// at the first start (etcd's --auto-tls) when no --cert-file is given.
	AutoTLS bool
	// PeerAutoTLS encrypts the peer port with a self-signed certificate
	// (etcd's --peer-auto-tls) when no --peer-cert-file is given; it
	// authenticates no member (see zab.PeerTLS.Unauthenticated).
	PeerAutoTLS  bool
	CipherSuites []uint16
	// TLSMinVersion and TLSMaxVersion bound every port's TLS versions
	// (etcd's --tls-min-version, --tls-max-version); 0: TLS 1.2 / Go's
	// newest.
	TLSMinVersion, TLSMaxVersion uint16

	// HTTP port hardening (etcd's --enable-pprof, --cors and
	// --host-whitelist).
	EnablePprof   bool
	CORS          []string
	HostWhitelist []string
	// DisableExtendedTypes turns TTL znodes off (--extended-types-enabled=false).
	DisableExtendedTypes bool
	EnforceQuota         bool
	// ZKReconfigEnabled serves ZooKeeper's reconfig (--zk-reconfig-enabled).
	ZKReconfigEnabled bool

	// applyFault is MemberConfig.ApplyFault, for tests that need a member
	// to stop as a failing disk would stop it; no flag sets it.
	applyFault func(index uint64) error
	// wrapBackend, if set, stands between the member and the faces, for
	// tests that need a state no flag makes (a raised alarm).
	wrapBackend func(core.Backend) core.Backend
}

// tlsFlags are one side's certificate flags.
type tlsFlags struct {
	tlsfiles.Files
	ClientCertAuth bool
}

// defaultCompactionRetention bounds history for a cluster whose clients
// never compact (ZooKeeper clients): an hour, where etcd keeps everything
// by default. Kubernetes compacts on its own to the revision of five
// minutes ago, further than an hour-old revision, so this changes nothing
// for it (see README, "Compaction and space").
const defaultCompactionRetention = "1h"

// Addrs are the addresses a running node listens on (ZK or ZKSecure empty
// when that port is off).
type Addrs struct {
	Etcd, ZK, ZKSecure, HTTP string
	Metrics                  []string
}

// parseFlags is parseConfig with no environment: what tests that build a
// Config from arguments alone use.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	return parseConfig(args, nil, stderr)
}

// parseConfig reads the configuration from the command line, then the
// JANUS_* variables of environ, then --config-file, then --zk-config; each
// sets only what the ones before it left unset (flags > env > file).
func parseConfig(args, environ []string, stderr io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("janus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config-file", "", "YAML configuration file: keys are the flag names (etcd's where they mean the same), values as on the command line; a bare number for a duration is milliseconds")
	zkConfig := fs.String("zk-config", "", "start from an existing ZooKeeper configuration file (zoo.cfg): see the README for the keys it maps and those it ignores")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	fs.StringVar(&cfg.DataDir, "data-dir", "janus-data", "directory for the log and the state")
	fs.StringVar(&cfg.EtcdListen, "etcd-listen", "127.0.0.1:2379", "address for etcd v3 gRPC clients")
	fs.StringVar(&cfg.ZKListen, "zk-listen", "127.0.0.1:2181", "address for plaintext ZooKeeper clients (empty: none, with --zk-secure-listen)")
	fs.StringVar(&cfg.ZKSecureListen, "zk-secure-listen", "", "address for ZooKeeper clients over TLS, as ZooKeeper's secureClientPort (needs --cert-file)")
	fs.StringVar(&cfg.HTTPListen, "http-listen", "127.0.0.1:8080", "address for /health, /livez, /readyz, the etcd JSON gateway (/v3/...), ZooKeeper admin commands (/commands/...) and /debug/pprof")
	metricsURLs := fs.String("listen-metrics-urls", "", "extra URLs (http://host:port,...) serving only /metrics and the health endpoints, as etcd's flag; /metrics is always on the HTTP address and the etcd client address too")
	cfg.ID = 1
	fs.Var((*memberIDFlag)(&cfg.ID), "id", "this member's `ID` in the ensemble: decimal, or hexadecimal after 0x (etcdctl prints IDs in hexadecimal without the 0x: --id 0x1a for its 1a)")
	clusterState := fs.String("initial-cluster-state", "new", "new: start (or restart) with the ensemble --peers and --observers name; existing: join a running ensemble this member was added to (etcdctl member add, zkCli reconfig -add), which it finds through --peers and --observers, starting with no vote and an empty data directory filled by the leader's snapshot. Once a member has a data directory its stored configuration wins over both, as etcd's flag is ignored then")
	peers := fs.String("peers", "", "voting ensemble members as id=host:port,... (peer addresses, this member included; empty: a single member)")
	observers := fs.String("observers", "", "non-voting ensemble members as id=host:port,... (they receive commits and serve reads)")
	peerEtcd := fs.String("peer-etcd", "", "every member's etcd client address as id=host:port,... (shown by MemberList)")
	peerZK := fs.String("peer-zk", "", "every member's ZooKeeper client address as id=host:port,... (shown by srvr/conf)")
	peerZKElection := fs.String("peer-zk-election", "", "every member's ZooKeeper election address as id=host:port,..., only shown back in /zookeeper/config (Janus elects over the peer port); a zoo.cfg's server.N lines set it")
	fs.StringVar(&cfg.AdvertiseEtcd, "advertise-etcd", "", "etcd client address this member advertises (default: its --peer-etcd entry, else --etcd-listen)")
	fs.StringVar(&cfg.AdvertiseZK, "advertise-zk", "", "ZooKeeper client address this member advertises (default: its --peer-zk entry, else --zk-listen)")
	fs.DurationVar(&cfg.ElectionTimeout, "election-timeout", time.Second, "how long without a leader (or, on the leader, without a quorum) before an election")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", 100*time.Millisecond, "the leader's heartbeat period (at most half of --election-timeout)")
	fs.IntVar(&cfg.MaxDiffEntries, "max-diff-entries", 100_000, "a member missing more log entries than this is sent a snapshot instead")
	for _, name := range []string{"corrupt-check-time", "experimental-corrupt-check-time"} {
		fs.DurationVar(&cfg.CorruptCheckTime, name, 5*time.Minute, "how often the leader has every member hash its state at one log index and compare (0: never)")
	}
	for _, name := range []string{"initial-corrupt-check", "experimental-initial-corrupt-check"} {
		fs.BoolVar(&cfg.InitialCorruptCheck, name, true, "compare this member's state with the others' as soon as it starts")
	}
	fs.Int64Var(&cfg.SpaceReserve, "space-reserve-bytes", server.DefaultSpaceReserve, "free space the data directory keeps: below it this member raises NOSPACE and refuses writes until space is freed (room for Badger to flush and compact)")
	fs.Int64Var(&cfg.QuotaBackendBytes, "quota-backend-bytes", 0, "space quota in bytes: past it a NOSPACE alarm is raised and writes that grow the state are refused (0: etcd's default, 2 GiB; negative: no quota)")
	compactMode := fs.String("auto-compaction-mode", server.CompactPeriodic, "automatic compaction: periodic (keep --auto-compaction-retention of time) or revision (keep that many revisions)")
	compactRetention := fs.String("auto-compaction-retention", defaultCompactionRetention, "history automatic compaction keeps: a duration or a number of hours (periodic), a number of revisions (revision); 0 turns it off")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", 1536*1024, "largest etcd request accepted, in bytes")
	fs.DurationVar(&cfg.WatchProgressNotify, "watch-progress-notify-interval", 10*time.Minute, "how often etcd watches with progress_notify get a progress notification")
	fs.StringVar(&cfg.AuthToken, "auth-token", "simple", "etcd auth token type: simple, or jwt,pub-key=FILE,priv-key=FILE,sign-method=METHOD[,ttl=DURATION]")
	fs.DurationVar(&cfg.AuthTokenTTL, "auth-token-ttl", etcdapi.DefaultTokenTTL, "how long a simple auth token stays valid after its last use on this member, as etcd's")
	fs.IntVar(&cfg.BcryptCost, "bcrypt-cost", bcrypt.DefaultCost, "bcrypt cost of etcd user password hashes (4..31)")
	fs.DurationVar(&cfg.TickTime, "tick-time", 2*time.Second, "ZooKeeper tickTime: session timeouts default to 2x..20x of it")
	fs.DurationVar(&cfg.MinSessionTimeout, "min-session-timeout", 0, "smallest ZooKeeper session timeout granted (default 2x tick-time)")
	fs.DurationVar(&cfg.MaxSessionTimeout, "max-session-timeout", 0, "largest ZooKeeper session timeout granted (default 20x tick-time)")
	fs.StringVar(&cfg.FourLetterWords, "4lw-whitelist", "srvr", "four-letter words answered on the ZooKeeper ports: * or a comma-separated list (ZooKeeper 3.8's default: srvr)")
	fs.StringVar(&cfg.ClientTLS.Cert, "cert-file", "", "client TLS certificate (PEM) for the etcd, ZooKeeper secure and HTTP ports; the etcd and HTTP ports serve TLS only once it is set")
	fs.StringVar(&cfg.ClientTLS.Key, "key-file", "", "client TLS key (PEM)")
	fs.StringVar(&cfg.ClientTLS.CA, "trusted-ca-file", "", "CA bundle (PEM) that client certificates must chain to")
	fs.BoolVar(&cfg.ClientTLS.ClientCertAuth, "client-cert-auth", false, "require every client to present a certificate that chains to --trusted-ca-file")
	fs.StringVar(&cfg.ClientTLS.CRL, "client-crl-file", "", "certificate revocation list (DER or PEM): clients presenting a certificate it lists are refused at the handshake; reread when the file changes")
	fs.BoolVar(&cfg.AutoTLS, "auto-tls", false, "without --cert-file: serve the client ports over TLS with a self-signed certificate made at the first start (kept under the data directory, fixtures/client); it encrypts but proves nothing, so clients must skip verifying it, as with etcd's flag")
	fs.StringVar(&cfg.HTTPTLS.Cert, "http-cert-file", "", "the HTTP port's own TLS certificate (PEM); default: the client certificate flags serve it")
	fs.StringVar(&cfg.HTTPTLS.Key, "http-key-file", "", "the HTTP port's own TLS key (PEM)")
	fs.StringVar(&cfg.HTTPTLS.CA, "http-trusted-ca-file", "", "CA bundle (PEM) that client certificates on the HTTP port must chain to")
	fs.BoolVar(&cfg.HTTPTLS.ClientCertAuth, "http-client-cert-auth", false, "require every HTTP client to present a certificate that chains to --http-trusted-ca-file")
	fs.StringVar(&cfg.HTTPTLS.CRL, "http-crl-file", "", "certificate revocation list for the HTTP port's clients (with --http-cert-file)")
	fs.StringVar(&cfg.PeerTLS.Cert, "peer-cert-file", "", "peer TLS certificate (PEM); it must hold the DNS SAN janus-member-<id>")
	fs.StringVar(&cfg.PeerTLS.Key, "peer-key-file", "", "peer TLS key (PEM)")
	fs.StringVar(&cfg.PeerTLS.CA, "peer-trusted-ca-file", "", "CA bundle (PEM) that peer certificates must chain to")
	fs.BoolVar(&cfg.PeerTLS.ClientCertAuth, "peer-client-cert-auth", true, "require peers to present certificates (always on with peer TLS: a member's ID is bound to its certificate)")
	fs.BoolVar(&cfg.PeerAutoTLS, "peer-auto-tls", false, "without --peer-cert-file: encrypt the peer port with a self-signed certificate made at the first start (fixtures/peer in the data directory), as etcd's flag; it authenticates no member, so any host reaching the peer port is trusted on the ID it claims")
	fs.StringVar(&cfg.PeerTLS.CRL, "peer-crl-file", "", "certificate revocation list (DER or PEM): peers presenting a certificate it lists are refused at the handshake, both ways")
	ciphers := fs.String("cipher-suites", "", "TLS 1.2 cipher suites allowed on every port, comma separated, as Go names them (default: Go's)")
	tlsMin := fs.String("tls-min-version", "TLS1.2", "oldest TLS version every port accepts: TLS1.2 or TLS1.3")
	tlsMax := fs.String("tls-max-version", "", "newest TLS version every port accepts: TLS1.2 or TLS1.3 (empty: Go's newest)")
	fs.BoolVar(&cfg.EnablePprof, "enable-pprof", false, "serve /debug/pprof on the HTTP port")
	cors := fs.String("cors", "", "origins allowed to call the HTTP port from a browser, comma separated (* for any; default: none)")
	hosts := fs.String("host-whitelist", "", "Host: header values the HTTP port accepts, comma separated (* for any; default: loopback names only when --http-listen is a loopback address, else any)")
	fs.DurationVar(&cfg.ReaperInterval, "reaper-interval", time.Second, "how often the leader removes empty containers and expired TTL znodes")
	fs.IntVar(&cfg.MaxBuffer, "jute-maxbuffer", 0xfffff, "largest ZooKeeper packet accepted, in bytes")
	fs.IntVar(&cfg.MaxClientConns, "max-client-cnxns", 60, "most connections one client IP may hold on the ZooKeeper port, as ZooKeeper's maxClientCnxns (0: no limit)")
	fs.IntVar(&cfg.MaxConns, "max-cnxns", 0, "most connections the ZooKeeper port holds in all, as ZooKeeper's maxCnxns (0: no limit)")
	idFromHostname := fs.Bool("id-from-hostname", false, "take --id from the trailing number of the host name, plus 1 (a Kubernetes StatefulSet's pod janus-0 is member 1)")
	extendedTypes := fs.Bool("extended-types-enabled", true, "allow TTL znodes, as ZooKeeper's extendedTypesEnabled (on by default in Janus; off when --zk-config's file does not turn it on, as in ZooKeeper)")
	fs.BoolVar(&cfg.EnforceQuota, "zk-enforce-quota", false, "refuse ZooKeeper writes past a hard quota set with setquota, as zookeeper.enforceQuota=true does")
	fs.BoolVar(&cfg.ZKReconfigEnabled, "zk-reconfig-enabled", false, "serve ZooKeeper's reconfig (zkCli's reconfig), as reconfigEnabled=true does; only a super user, or one granted WRITE on /zookeeper/config, may change the ensemble (off: ReconfigDisabled)")
	fs.StringVar(&cfg.ZKSuperDigest, "zk-super-digest", "", "ZooKeeper super user as user:base64(sha1(user:password)), as -Dzookeeper.DigestAuthenticationProvider.superDigest: a session that adds that digest passes every ACL")
	fs.StringVar(&cfg.ZKX509SuperUser, "zk-x509-super-user", "", "client certificate subject (RFC 2253, as x509 ACLs name it) that is the ZooKeeper super user, as -Dzookeeper.X509AuthenticationProvider.superUser")
	jaasFile := fs.String("zk-sasl-jaas-file", "", "JAAS file whose Server section's user_NAME=\"password\" options are the SASL DIGEST-MD5 users of the ZooKeeper face, as ZooKeeper's -Djava.security.auth.login.config")
	fs.StringVar(&cfg.ZKSASLSuperUser, "zk-sasl-super-user", "", "SASL user that is the ZooKeeper super user, as -Dzookeeper.superUser")
	enforceSchemes := fs.String("zk-enforce-auth-schemes", "", "refuse, and close, a ZooKeeper session's requests until it holds an identity of one of these schemes (comma separated), as zookeeper.enforce.auth.enabled with enforce.auth.schemes; sasl is sessionRequireClientSASLAuth")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if err := applySources(fs, environ, stderr, configFile, zkConfig); err != nil {
		return cfg, err
	}
	cfg.DisableExtendedTypes = !*extendedTypes
	if *idFromHostname {
		host, err := os.Hostname()
		if err != nil {
			return cfg, fmt.Errorf("--id-from-hostname: %w", err)
		}
		if cfg.ID, err = idFromOrdinal(host); err != nil {
			return cfg, fmt.Errorf("--id-from-hostname: %w", err)
		}
	}
	switch *logFormat {
	case "json", "text":
		cfg.LogFormat = *logFormat
	default:
		return cfg, fmt.Errorf("--log-format: %q is neither json nor text", *logFormat)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, fmt.Errorf("--log-level: %w", err)
	}
	var err error
	if cfg.CipherSuites, err = tlsfiles.ParseCipherSuites(*ciphers); err != nil {
		return cfg, fmt.Errorf("--cipher-suites: %w", err)
	}
	if cfg.TLSMinVersion, err = tlsfiles.ParseVersion(*tlsMin); err != nil {
		return cfg, fmt.Errorf("--tls-min-version: %w", err)
	}
	if cfg.TLSMaxVersion, err = tlsfiles.ParseVersion(*tlsMax); err != nil {
		return cfg, fmt.Errorf("--tls-max-version: %w", err)
	}
	if err := tlsfiles.CheckVersions(cfg.TLSMinVersion, cfg.TLSMaxVersion, cfg.CipherSuites); err != nil {
		return cfg, fmt.Errorf("--tls-min-version, --tls-max-version, --cipher-suites: %w", err)
	}
	cfg.CORS, cfg.HostWhitelist = splitList(*cors), splitList(*hosts)
	cfg.ZKEnforceAuthSchemes = splitList(*enforceSchemes)
	if *jaasFile != "" {
		if cfg.ZKSASLUsers, err = zkapi.ReadJAASUsers(*jaasFile, "Server"); err != nil {
			return cfg, fmt.Errorf("--zk-sasl-jaas-file: %w", err)
		}
	}
	zkAuth := zkapi.Config{SuperDigest: cfg.ZKSuperDigest, EnforceAuthSchemes: cfg.ZKEnforceAuthSchemes}
	if err := zkAuth.CheckAuth(); err != nil {
		return cfg, fmt.Errorf("ZooKeeper authentication flags: %w", err)
	}
	if err := checkTLS(cfg); err != nil {
		return cfg, err
	}
	if cfg.ID == 0 {
		return cfg, errors.New("--id must be at least 1")
	}
	switch *clusterState {
	case "new":
	case "existing":
		cfg.Join = true
	default:
		return cfg, fmt.Errorf("--initial-cluster-state: %q is neither new nor existing", *clusterState)
	}
	for _, u := range splitList(*metricsURLs) {
		addr, ok := strings.CutPrefix(u, "http://")
		if !ok || addr == "" || strings.Contains(addr, "/") {
			return cfg, fmt.Errorf("--listen-metrics-urls: %q is not http://host:port", u)
		}
		cfg.MetricsListen = append(cfg.MetricsListen, addr)
	}
	for _, l := range []struct {
		flag, value string
		dst         *map[uint64]string
	}{{"peers", *peers, &cfg.Peers}, {"observers", *observers, &cfg.Observers}, {"peer-etcd", *peerEtcd, &cfg.PeerEtcd}, {"peer-zk", *peerZK, &cfg.PeerZK}, {"peer-zk-election", *peerZKElection, &cfg.PeerZKElection}} {
		m, err := parsePeers(l.value)
		if err != nil {
			return cfg, fmt.Errorf("--%s: %w", l.flag, err)
		}
		*l.dst = m
	}
	if err := checkEnsemble(cfg); err != nil {
		return cfg, err
	}
	if err := zab.CheckTimeouts(cfg.HeartbeatInterval, cfg.ElectionTimeout); err != nil {
		return cfg, fmt.Errorf("--heartbeat-interval and --election-timeout: %w", err)
	}
	ac, err := server.ParseAutoCompaction(*compactMode, *compactRetention)
	if err != nil {
		return cfg, fmt.Errorf("--auto-compaction-mode/--auto-compaction-retention: %w", err)
	}
	cfg.AutoCompaction = ac
	if cfg.CorruptCheckTime < 0 {
		return cfg, errors.New("--corrupt-check-time must not be negative (0 turns the check off)")
	}
	if cfg.SpaceReserve <= 0 {
		return cfg, errors.New("--space-reserve-bytes must be positive")
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

// checkTLS refuses certificate flags that do not make a working setup.
func checkTLS(cfg Config) error {
	for _, side := range []struct {
		prefix string
		f      tlsFlags
	}{{"", cfg.ClientTLS}, {"peer-", cfg.PeerTLS}, {"http-", cfg.HTTPTLS}} {
		if (side.f.Cert == "") != (side.f.Key == "") {
			return fmt.Errorf("--%scert-file and --%skey-file go together", side.prefix, side.prefix)
		}
		auto := side.prefix == "" && cfg.AutoTLS || side.prefix == "peer-" && cfg.PeerAutoTLS
		if side.f.Cert == "" && side.f.CA != "" {
			return fmt.Errorf("--%strusted-ca-file needs --%scert-file", side.prefix, side.prefix)
		}
		crl := side.prefix + "crl-file"
		if side.prefix == "" {
			crl = "client-crl-file"
		}
		if side.f.Cert == "" && !auto && side.f.CRL != "" {
			return fmt.Errorf("--%s needs --%scert-file", crl, side.prefix)
		}
	}
	if cfg.ClientTLS.ClientCertAuth && cfg.ClientTLS.CA == "" {
		return errors.New("--client-cert-auth needs --trusted-ca-file")
	}
	if cfg.HTTPTLS.ClientCertAuth && cfg.HTTPTLS.CA == "" {
		return errors.New("--http-client-cert-auth needs --http-trusted-ca-file")
	}
	if cfg.PeerTLS.Cert != "" {
		if cfg.PeerTLS.CA == "" {
			return errors.New("--peer-cert-file needs --peer-trusted-ca-file: peers verify each other's certificates")
		}
		if !cfg.PeerTLS.ClientCertAuth {
			return errors.New("--peer-client-cert-auth=false is not supported: a member's ID is bound to the certificate it presents")
		}
	}
	if cfg.ZKSecureListen != "" && cfg.ClientTLS.Cert == "" && !cfg.AutoTLS {
		return errors.New("--zk-secure-listen needs --cert-file and --key-file (or --auto-tls)")
	}
	if cfg.ZKListen == "" && cfg.ZKSecureListen == "" {
		return errors.New("--zk-listen may be empty only with --zk-secure-listen")
	}
	return nil
}

// idFromOrdinal returns the member ID for a host name ending in an
// ordinal, as a StatefulSet names its pods (janus-0, janus-1, ...): the
// ordinal plus 1, since member IDs start at 1.
func idFromOrdinal(host string) (uint64, error) {
	host, _, _ = strings.Cut(host, ".")
	i := strings.LastIndexFunc(host, func(r rune) bool { return r < '0' || r > '9' })
	n, err := strconv.ParseUint(host[i+1:], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("host name %q does not end in a number", host)
	}
	return n + 1, nil
}

// checkEnsemble refuses ensemble flags that cannot describe one ensemble.
func checkEnsemble(cfg Config) error {
	if len(cfg.Peers) == 0 {
		if len(cfg.Observers) > 0 {
			return errors.New("--observers needs --peers: observers follow a voting ensemble")
		}
		if cfg.Join {
			return errors.New("--initial-cluster-state existing needs --peers: the members of the running ensemble this member joins")
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
	for flag, m := range map[string]map[uint64]string{"--peer-etcd": cfg.PeerEtcd, "--peer-zk": cfg.PeerZK, "--peer-zk-election": cfg.PeerZKElection} {
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
		id, err := parseMemberID(idStr)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("id %d appears twice", id)
		}
		peers[id] = addr
	}
	return peers, nil
}

// memberIDFlag is --id: a member ID as parseMemberID reads it.
type memberIDFlag uint64

func (f *memberIDFlag) String() string { return strconv.FormatUint(uint64(*f), 10) }

func (f *memberIDFlag) Set(s string) error {
	id, err := parseMemberID(s)
	if err != nil {
		return err
	}
	*f = memberIDFlag(id)
	return nil
}

// parseMemberID reads a member ID as the command line names one (--id,
// the ids of --peers and the other id=host:port lists): decimal, or
// hexadecimal after 0x. etcdctl prints member IDs in hexadecimal without a
// prefix (member add's "Member 1a added to cluster ..."), and that form
// is refused rather than guessed: its digits-only IDs ("10" for sixteen)
// read as decimal would silently name another member. A leading zero is
// decimal too, not octal as Go's own flag parsing would take it.
func parseMemberID(s string) (uint64, error) {
	var (
		id  uint64
		err error
	)
	if hex, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		id, err = strconv.ParseUint(hex, 16, 64)
	} else {
		id, err = strconv.ParseUint(s, 10, 64)
		if err != nil {
			if _, hexErr := strconv.ParseUint(s, 16, 64); hexErr == nil {
				return 0, fmt.Errorf("member ID %q is not decimal: for the hexadecimal ID etcdctl prints, put 0x in front (0x%s)", s, s)
			}
		}
	}
	if err != nil || id == 0 {
		return 0, fmt.Errorf("member ID %q is not a positive number (decimal, or hexadecimal after 0x)", s)
	}
	return id, nil
}
