package zkapi

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/januskv/janus/zkapi/jute"
)

// Config tunes a Server. Zero values get ZooKeeper's defaults.
type Config struct {
	Logger *slog.Logger
	// TickTime is ZooKeeper's basic time unit (default 2s).
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the negotiated session
	// timeout (default 2 and 20 ticks).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxBuffer is jute.maxbuffer: the largest frame accepted (default
	// 0xfffff). A larger frame closes its connection.
	MaxBuffer int
	// FourLetterWhitelist names the four-letter words served, like
	// 4lw.commands.whitelist; "*" serves every one. nil serves ZooKeeper
	// 3.8's default, srvr only: cons, dump and others list session IDs
	// and client addresses to anyone who can connect.
	FourLetterWhitelist []string
	// ReaperInterval is what conf reports as reaperIntervalMs (default
	// 1s): how often the leader looks for empty containers and expired TTL
	// nodes. The member reaps them, whatever faces it serves (see
	// server.MemberConfig.ReaperInterval).
	ReaperInterval time.Duration
	// DisableExtendedTypes turns TTL nodes off, as ZooKeeper's
	// extendedTypesEnabled=false does (they are on by default).
	DisableExtendedTypes bool
	// MaxClientConns bounds connections per client IP, as ZooKeeper's
	// maxClientCnxns (0: no limit). MaxConns bounds them all, as its
	// maxCnxns (0: no limit). A connection over a limit is closed at once.
	MaxClientConns int
	MaxConns       int
	// MaxOutstanding bounds the requests one connection has read and not
	// yet answered (default 1000, ZooKeeper's globalOutstandingLimit);
	// once it is reached the connection reads no more until the oldest
	// is answered.
	MaxOutstanding int
	// EnforceQuota refuses creates and setData that pass a hard quota set
	// under /zookeeper/quota, as ZooKeeper's zookeeper.enforceQuota=true
	// does (off by default, as in ZooKeeper); see quota.go.
	EnforceQuota bool
	// ReconfigEnabled serves the reconfig request, as ZooKeeper's
	// reconfigEnabled=true does; off (the default, as in ZooKeeper 3.8)
	// it is refused with ReconfigDisabled. Either way only a super user,
	// or one a super user granted WRITE on /zookeeper/config, may change
	// the ensemble.
	ReconfigEnabled bool
	// Dirs names the directories conf and dirs report as ZooKeeper's
	// dataDir (the state) and dataLogDir (the log); nil reports none.
	Dirs func() (data, log string)
	// RootToken reports whether an etcd auth token names a root user
	// under the current auth state; with etcd auth on, the admin commands
	// that show sessions need one (see adminauth.go). nil refuses every
	// token.
	RootToken func(token string) bool

	// SuperDigest is ZooKeeper's DigestAuthenticationProvider.superDigest,
	// "user:base64(sha1(user:password))": a session that adds that digest
	// identity is also super, which passes every ACL.
	SuperDigest string
	// X509SuperUser is zookeeper.X509AuthenticationProvider.superUser: a
	// TLS client whose certificate subject is this name is super.
	X509SuperUser string
	// SASLUsers are the users and passwords SASL DIGEST-MD5 accepts, as a
	// ZooKeeper server's JAAS Server section lists them (see
	// ReadJAASUsers); nil answers SASL requests as a ZooKeeper without a
	// JAAS login does.
	SASLUsers map[string]string
	// SASLSuperUser is zookeeper.superUser: the SASL user that is super.
	SASLSuperUser string
	// EnforceAuthSchemes, when not empty, refuses every request but auth
	// and SASL from a session that holds no identity of one of these
	// schemes, and closes it, as ZooKeeper's enforce.auth.enabled with
	// enforce.auth.schemes (sessionRequireClientSASLAuth is ["sasl"]).
	EnforceAuthSchemes []string
}

// AuthSchemes are the schemes a session can authenticate with, and so
// those EnforceAuthSchemes may name.
var AuthSchemes = []string{"ip", "digest", "x509", "sasl", "etcd"}

// CheckAuth reports a misconfigured authentication setting, which
// ZooKeeper would refuse to start with.
func (c Config) CheckAuth() error {
	for _, s := range c.EnforceAuthSchemes {
		if !slices.Contains(AuthSchemes, s) {
			return fmt.Errorf("authentication scheme %q is not available (have %s)", s, strings.Join(AuthSchemes, ", "))
		}
	}
	if c.SuperDigest != "" && !validDigestID(c.SuperDigest) {
		return fmt.Errorf("super digest %q is not user:base64-sha1", c.SuperDigest)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TickTime <= 0 {
		c.TickTime = 2 * time.Second
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 2 * c.TickTime
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 20 * c.TickTime
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		c.MaxSessionTimeout = c.MinSessionTimeout
	}
	if c.MaxBuffer <= 0 {
		c.MaxBuffer = jute.DefaultMaxBuffer
	}
	if c.MaxOutstanding <= 0 {
		c.MaxOutstanding = 1000
	}
	if c.ReaperInterval <= 0 {
		c.ReaperInterval = time.Second
	}
	return c
}

// negotiateTimeout clamps a requested session timeout (ms) as ZooKeeper does.
func (c Config) negotiateTimeout(requested int32) int32 {
	lo, hi := int32(c.MinSessionTimeout.Milliseconds()), int32(c.MaxSessionTimeout.Milliseconds())
	return min(max(requested, lo), hi)
}
