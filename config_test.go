package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/server"
)

func TestEnsembleFlags(t *testing.T) {
	three := "1=127.0.0.1:2888,2=127.0.0.1:2889,3=127.0.0.1:2890"
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		{"single member", nil, ""},
		{"three voters", []string{"--id", "2", "--peers", three}, ""},
		{"observer", []string{"--id", "4", "--peers", three, "--observers", "4=127.0.0.1:2891"}, ""},
		{"client addresses", []string{"--id", "1", "--peers", three, "--peer-etcd", "1=127.0.0.1:2379,2=127.0.0.1:2380", "--peer-zk", "3=127.0.0.1:2181"}, ""},
		{"id not in the ensemble", []string{"--id", "9", "--peers", three}, "neither"},
		{"voter and observer", []string{"--id", "1", "--peers", three, "--observers", "3=127.0.0.1:2891"}, "both"},
		{"observers without voters", []string{"--observers", "1=127.0.0.1:2891"}, "needs --peers"},
		{"client address of a stranger", []string{"--id", "1", "--peers", three, "--peer-etcd", "7=127.0.0.1:2379"}, "member 7"},
		{"duplicate id", []string{"--id", "1", "--peers", "1=a:1,1=a:2"}, "twice"},
		{"heartbeat not below election timeout", []string{"--heartbeat-interval", "2s", "--election-timeout", "1s"}, "heartbeat"},
		// zab needs a follower to hear two heartbeats per timeout.
		{"heartbeat over half the election timeout", []string{"--heartbeat-interval", "600ms", "--election-timeout", "1s"}, "at most half"},
		{"heartbeat not positive", []string{"--heartbeat-interval", "0s"}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parseExpect(t, tt.args, tt.wantErr)
		})
	}
}

// TestInitialClusterStateFlag checks --initial-cluster-state: new (the
// default) starts the ensemble the flags name, existing joins a running
// one and so needs --peers to find it.
func TestInitialClusterStateFlag(t *testing.T) {
	four := "1=127.0.0.1:2888,2=127.0.0.1:2889,3=127.0.0.1:2890,4=127.0.0.1:2891"
	tests := []struct {
		name     string
		args     []string
		wantJoin bool
		wantErr  string
	}{
		{"default", []string{"--id", "4", "--peers", four}, false, ""},
		{"new", []string{"--id", "4", "--peers", four, "--initial-cluster-state", "new"}, false, ""},
		{"existing", []string{"--id", "4", "--peers", four, "--initial-cluster-state", "existing"}, true, ""},
		{"existing learner", []string{"--id", "4", "--peers", "1=127.0.0.1:2888", "--observers", "4=127.0.0.1:2891", "--initial-cluster-state=existing"}, true, ""},
		{"existing without peers", []string{"--initial-cluster-state", "existing"}, false, "needs --peers"},
		{"existing without its own address", []string{"--id", "5", "--peers", four, "--initial-cluster-state", "existing"}, false, "neither"},
		{"unknown state", []string{"--initial-cluster-state", "Existing"}, false, "neither new nor existing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parseExpect(t, tt.args, tt.wantErr)
			if tt.wantErr == "" && cfg.Join != tt.wantJoin {
				t.Errorf("Join = %v, want %v", cfg.Join, tt.wantJoin)
			}
		})
	}
}

// TestMemberIDs checks how --id and the ids of --peers are read: decimal,
// or hexadecimal after 0x, as an operator copies an ID etcdctl printed
// (in hexadecimal without the 0x). Bare hexadecimal is refused with a hint
// instead of guessed, and a leading zero is not octal.
func TestMemberIDs(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    uint64
		wantErr string
	}{
		{"1", 1, ""},
		{"10", 10, ""},
		{"010", 10, ""},
		{"0x10", 16, ""},
		{"0X1A", 26, ""},
		{"0x8e9e05c52164694d", 0x8e9e05c52164694d, ""},
		{"8e9e05c52164694d", 0, "put 0x in front (0x8e9e05c52164694d)"},
		{"1a", 0, "put 0x in front"},
		{"0", 0, "not a positive number"},
		{"0x0", 0, "not a positive number"},
		{"0x", 0, "not a positive number"},
		{"-1", 0, "not a positive number"},
		{"one", 0, "not a positive number"},
		{"18446744073709551616", 0, "not a positive number"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseMemberID(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseMemberID(%q) = %d, %v; want an error mentioning %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseMemberID(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			// The same rule holds for --id and for the ids of --peers.
			peers := tt.in + "=127.0.0.1:2888,99=127.0.0.1:2889"
			cfg := parseExpect(t, []string{"--id", tt.in, "--peers", peers}, "")
			if cfg.ID != tt.want || cfg.Peers[tt.want] != "127.0.0.1:2888" {
				t.Errorf("--id %s --peers %s: ID %d, peers %v; want %d", tt.in, peers, cfg.ID, cfg.Peers, tt.want)
			}
		})
	}
	parseExpect(t, []string{"--id", "1a"}, "put 0x in front")
}

func TestCorruptCheckFlags(t *testing.T) {
	tests := []struct {
		args     []string
		interval time.Duration
		initial  bool
		wantErr  string
	}{
		{nil, 5 * time.Minute, true, ""},
		{[]string{"--corrupt-check-time", "0", "--initial-corrupt-check=false"}, 0, false, ""},
		// etcd's older, experimental names are accepted too.
		{[]string{"--experimental-corrupt-check-time", "30s", "--experimental-initial-corrupt-check=false"}, 30 * time.Second, false, ""},
		{[]string{"--corrupt-check-time", "-1s"}, 0, false, "negative"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg := parseExpect(t, tt.args, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			if cfg.CorruptCheckTime != tt.interval || cfg.InitialCorruptCheck != tt.initial {
				t.Fatalf("interval %v initial %v, want %v %v", cfg.CorruptCheckTime, cfg.InitialCorruptCheck, tt.interval, tt.initial)
			}
		})
	}
}

func TestTLSFlags(t *testing.T) {
	pair := []string{"--cert-file", "s.crt", "--key-file", "s.key"}
	peer := []string{"--peer-cert-file", "p.crt", "--peer-key-file", "p.key"}
	with := func(a []string, more ...string) []string { return append(append([]string{}, a...), more...) }
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		{"client TLS", pair, ""},
		{"client TLS with client certificates", with(pair, "--trusted-ca-file", "ca.crt", "--client-cert-auth"), ""},
		{"cert without key", []string{"--cert-file", "s.crt"}, "go together"},
		{"CA without cert", []string{"--trusted-ca-file", "ca.crt"}, "needs --cert-file"},
		{"client-cert-auth without CA", with(pair, "--client-cert-auth"), "needs --trusted-ca-file"},
		{"ZooKeeper TLS port", with(pair, "--zk-secure-listen", "127.0.0.1:2281"), ""},
		{"ZooKeeper TLS port only", with(pair, "--zk-secure-listen", "127.0.0.1:2281", "--zk-listen", ""), ""},
		{"ZooKeeper TLS port without a certificate", []string{"--zk-secure-listen", "127.0.0.1:2281"}, "needs --cert-file"},
		{"no ZooKeeper port", []string{"--zk-listen", ""}, "only with --zk-secure-listen"},
		{"peer TLS", with(peer, "--peer-trusted-ca-file", "ca.crt"), ""},
		{"peer TLS without a CA", peer, "needs --peer-trusted-ca-file"},
		{"peer TLS without client certificates", with(peer, "--peer-trusted-ca-file", "ca.crt", "--peer-client-cert-auth=false"), "not supported"},
		{"peer key without cert", []string{"--peer-key-file", "p.key"}, "go together"},
		{"cipher suites", []string{"--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, ""},
		{"an insecure cipher suite", []string{"--cipher-suites", "TLS_RSA_WITH_RC4_128_SHA"}, "--cipher-suites"},
		{"client CRL", with(pair, "--client-crl-file", "c.crl"), ""},
		{"client CRL without a certificate", []string{"--client-crl-file", "c.crl"}, "--client-crl-file needs --cert-file"},
		{"peer CRL", with(peer, "--peer-trusted-ca-file", "ca.crt", "--peer-crl-file", "p.crl"), ""},
		{"peer CRL without a certificate", []string{"--peer-crl-file", "p.crl"}, "--peer-crl-file needs --peer-cert-file"},
		{"auto TLS", []string{"--auto-tls"}, ""},
		{"peer auto TLS", []string{"--peer-auto-tls"}, ""},
		{"peer auto TLS with a CRL", []string{"--peer-auto-tls", "--peer-crl-file", "p.crl"}, ""},
		{"auto TLS with a CRL", []string{"--auto-tls", "--client-crl-file", "c.crl"}, ""},
		{"auto TLS with a ZooKeeper TLS port", []string{"--auto-tls", "--zk-secure-listen", "127.0.0.1:2281"}, ""},
		{"auto TLS cannot verify client certificates", []string{"--auto-tls", "--client-cert-auth"}, "needs --trusted-ca-file"},
		{"HTTP's own certificate", []string{"--http-cert-file", "h.crt", "--http-key-file", "h.key", "--http-trusted-ca-file", "ca.crt", "--http-client-cert-auth"}, ""},
		{"HTTP cert without key", []string{"--http-cert-file", "h.crt"}, "--http-cert-file and --http-key-file go together"},
		{"HTTP client-cert-auth without CA", []string{"--http-cert-file", "h.crt", "--http-key-file", "h.key", "--http-client-cert-auth"}, "needs --http-trusted-ca-file"},
		{"HTTP CA without cert", []string{"--http-trusted-ca-file", "ca.crt"}, "needs --http-cert-file"},
		{"TLS 1.3 only", []string{"--tls-min-version", "TLS1.3"}, ""},
		{"TLS 1.2 only", []string{"--tls-max-version", "TLS1.2"}, ""},
		{"min above max", []string{"--tls-min-version", "TLS1.3", "--tls-max-version", "TLS1.2"}, "min version (TLS1.3) is greater than max version (TLS1.2)"},
		{"cipher suites with TLS 1.3 only", []string{"--tls-min-version", "TLS1.3", "--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, "cipher suites cannot be configured when only TLS1.3 is enabled"},
		{"TLS 1.1", []string{"--tls-min-version", "TLS1.1"}, "must be one of: TLS1.2, TLS1.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parseExpect(t, tt.args, tt.wantErr)
		})
	}
}

// A certificate file that does not load stops the server at start, with
// the flag's file in the message.
func TestUnreadableCertificateStopsStart(t *testing.T) {
	cfg := testConfig(t)
	cfg.ClientTLS.Cert, cfg.ClientTLS.Key = "missing.crt", "missing.key"
	if _, err := startNode(cfg, testLogger(t)); err == nil || !strings.Contains(err.Error(), "missing.crt") {
		t.Fatalf("startNode with a missing certificate: %v", err)
	}
}

func TestSpaceReserveFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    int64
		wantErr string
	}{
		{nil, 128 << 20, ""},
		{[]string{"--space-reserve-bytes", "1048576"}, 1 << 20, ""},
		{[]string{"--space-reserve-bytes", "0"}, 0, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg := parseExpect(t, tt.args, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			if cfg.SpaceReserve != tt.want {
				t.Fatalf("reserve %d, want %d", cfg.SpaceReserve, tt.want)
			}
		})
	}
}

func TestIDFromOrdinal(t *testing.T) {
	for _, c := range []struct {
		host string
		id   uint64
		ok   bool
	}{
		{"janus-0", 1, true},
		{"janus-2.janus-peer.default.svc.cluster.local", 3, true},
		{"zk-12", 13, true},
		{"janus", 0, false},
		{"janus-", 0, false},
	} {
		id, err := idFromOrdinal(c.host)
		if (err == nil) != c.ok || id != c.id {
			t.Errorf("%q: got %d, %v; want %d (ok %v)", c.host, id, err, c.id, c.ok)
		}
	}
}

func TestSpaceFlags(t *testing.T) {
	tests := []struct {
		args    []string
		quota   int64
		compact server.AutoCompaction
		wantErr string
	}{
		// Janus keeps an hour of history unless told otherwise.
		{nil, 0, server.AutoCompaction{Mode: "periodic", Period: time.Hour}, ""},
		{[]string{"--quota-backend-bytes", "-1", "--auto-compaction-retention", "0"}, -1, server.AutoCompaction{}, ""},
		{[]string{"--quota-backend-bytes", "8589934592", "--auto-compaction-mode", "revision", "--auto-compaction-retention", "10000"}, 8 << 30, server.AutoCompaction{Mode: "revision", Revisions: 10000}, ""},
		{[]string{"--auto-compaction-retention", "2"}, 0, server.AutoCompaction{Mode: "periodic", Period: 2 * time.Hour}, ""},
		{[]string{"--auto-compaction-mode", "revision", "--auto-compaction-retention", "1h"}, 0, server.AutoCompaction{}, "number of revisions"},
		{[]string{"--auto-compaction-mode", "hourly"}, 0, server.AutoCompaction{}, "neither periodic nor revision"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg := parseExpect(t, tt.args, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			if cfg.QuotaBackendBytes != tt.quota || cfg.AutoCompaction != tt.compact {
				t.Fatalf("quota %d, compaction %+v; want %d, %+v", cfg.QuotaBackendBytes, cfg.AutoCompaction, tt.quota, tt.compact)
			}
		})
	}
}

func TestAuthFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"--auth-token", "simple", "--auth-token-ttl", "1m", "--bcrypt-cost", "4"}, ""},
		{[]string{"--bcrypt-cost", "3"}, "--bcrypt-cost"},
		{[]string{"--bcrypt-cost", "32"}, "--bcrypt-cost"},
		{[]string{"--auth-token", "opaque"}, "unknown --auth-token type"},
		{[]string{"--auth-token", "simple,ttl=1m"}, "no options"},
		{[]string{"--auth-token", "jwt,sign-method=RS256"}, "missing key"},
		{[]string{"--auth-token", "jwt,sign-method=XX"}, "sign-method"},
		{[]string{"--auth-token", "jwt,sign-method=RS256,priv-key=/nonexistent"}, "priv-key"},
		{[]string{"--auth-token", "jwt,sign-method=RS256,colour=blue"}, "unknown jwt option"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			parseExpect(t, tt.args, tt.wantErr)
		})
	}
}

// parseExpect parses args as the command line and checks the outcome: no
// error when wantErr is empty (the parsed Config is returned), else an
// error mentioning wantErr.
func parseExpect(t *testing.T, args []string, wantErr string) Config {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	if wantErr == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return cfg
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("got %v (config %+v), want an error mentioning %q", err, cfg, wantErr)
	}
	return cfg
}
