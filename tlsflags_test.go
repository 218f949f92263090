package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testcert"
	"github.com/januskv/janus/internal/testenv"
)

// etcdctlRun runs the real etcdctl with args against endpoint.
func etcdctlRun(t *testing.T, ctx context.Context, endpoint string, args ...string) (string, error) {
	t.Helper()
	full := append([]string{"--endpoints", endpoint, "--dial-timeout", "5s", "--command-timeout", "10s"}, args...)
	out, err := exec.CommandContext(ctx, testenv.EtcdctlPath(t), full...).CombinedOutput()
	return string(out), err
}

// clientPut reports whether clientv3 with cfg can write through endpoint.
func clientPut(ctx context.Context, endpoint string, cfg *tls.Config) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: cfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.Put(cctx, "/tls-flags", "v")
	return err
}

// TestClientCRLRefusesRevokedCertificates runs a node with
// --client-crl-file listing one client's certificate: etcdctl and clientv3
// with that certificate are refused at the handshake, a client whose
// certificate the CRL does not list is served, on the etcd and HTTP
// ports alike.
func TestClientCRLRefusesRevokedCertificates(t *testing.T) {
	s := newTLSSetup(t)
	mallory := s.ca.Issue(t, "mallory")
	mf := s.ca.Write(t, mallory, s.dir, "mallory")
	crl := filepath.Join(s.dir, "clients.crl")
	testcert.WriteFile(t, crl, s.ca.CRL(t, mallory))
	a := startInProcess(t, t.TempDir(), append(s.flags(), "--client-crl-file", crl)...)
	ctx := t.Context()

	tlsArgs := func(f testcert.Files) []string { return []string{"--cacert", f.CA, "--cert", f.Cert, "--key", f.Key} }
	if out, err := etcdctlRun(t, ctx, "https://"+a.Etcd, append(tlsArgs(s.client), "put", "/crl", "alice")...); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("etcdctl with a certificate the CRL does not list: %v\n%s", err, out)
	}
	if out, err := etcdctlRun(t, ctx, "https://"+a.Etcd, append(tlsArgs(mf), "put", "/crl", "mallory")...); err == nil {
		t.Fatalf("etcdctl with a revoked certificate wrote:\n%s", out)
	}
	malloryCfg := s.clientConfig(t, true)
	pair, err := tls.X509KeyPair(mallory.Cert, mallory.Key)
	if err != nil {
		t.Fatal(err)
	}
	malloryCfg.Certificates = []tls.Certificate{pair}
	if err := clientPut(ctx, a.Etcd, malloryCfg); err == nil {
		t.Fatal("clientv3 with a revoked certificate wrote")
	}
	if err := clientPut(ctx, a.Etcd, s.clientConfig(t, false)); err != nil {
		t.Fatalf("clientv3 with a certificate the CRL does not list: %v", err)
	}
	// The refusal is the handshake's: the server names the certificate.
	c, err := tls.Dial("tcp", a.Etcd, malloryCfg)
	if err == nil {
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "bad certificate") {
		t.Errorf("a TLS client with a revoked certificate: %v, want the server's \"bad certificate\" alert", err)
	}
	get := func(cfg *tls.Config) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		resp, err := hc.Get("https://" + a.HTTP + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(malloryCfg); err == nil {
		t.Error("the HTTP port served a revoked certificate")
	}
	if err := get(s.clientConfig(t, false)); err != nil {
		t.Errorf("the HTTP port with a certificate the CRL does not list: %v", err)
	}
}

// TestTLSVersionFlags runs a node capped at TLS 1.2 and one held to TLS
// 1.3: a client that speaks only the other version is refused by each,
// and etcdctl, which speaks both, is served by both.
func TestTLSVersionFlags(t *testing.T) {
	s := newTLSSetup(t)
	ctx := t.Context()
	for _, tc := range []struct {
		flag, value string
		refused     uint16 // the version a client must not get through with
		served      uint16
	}{
		{"--tls-max-version", "TLS1.2", tls.VersionTLS13, tls.VersionTLS12},
		{"--tls-min-version", "TLS1.3", tls.VersionTLS12, tls.VersionTLS13},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			a := startInProcess(t, t.TempDir(), append(s.flags(), tc.flag, tc.value)...)
			only := func(v uint16) *tls.Config {
				cfg := s.clientConfig(t, false)
				cfg.MinVersion, cfg.MaxVersion = v, v
				return cfg
			}
			if err := clientPut(ctx, a.Etcd, only(tc.refused)); err == nil {
				t.Errorf("clientv3 speaking only %s wrote", tls.VersionName(tc.refused))
			}
			if err := clientPut(ctx, a.Etcd, only(tc.served)); err != nil {
				t.Errorf("clientv3 speaking only %s: %v", tls.VersionName(tc.served), err)
			}
			c, err := tls.Dial("tcp", a.Etcd, only(tc.served))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ConnectionState().Version; got != tc.served {
				t.Errorf("negotiated %s, want %s", tls.VersionName(got), tls.VersionName(tc.served))
			}
			c.Close()
			if out, err := etcdctlRun(t, ctx, "https://"+a.Etcd, "--cacert", s.client.CA, "--cert", s.client.Cert, "--key", s.client.Key, "put", "/v", "x"); err != nil {
				t.Errorf("etcdctl: %v\n%s", err, out)
			}
		})
	}
}

// TestAutoTLS runs a node with --auto-tls: etcdctl reaches it over TLS
// when told not to verify the certificate (as it must with etcd's), is
// refused when it verifies, and the certificate is kept in the data
// directory, the same at the next start.
func TestAutoTLS(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a := startInProcess(t, dir, "--auto-tls")
	skip := []string{"--insecure-transport=false", "--insecure-skip-tls-verify"}
	if out, err := etcdctlRun(t, ctx, a.Etcd, append(skip, "put", "/auto", "tls")...); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("etcdctl --insecure-skip-tls-verify against --auto-tls: %v\n%s", err, out)
	}
	if out, err := etcdctlRun(t, ctx, a.Etcd, append(skip, "get", "/auto", "--print-value-only")...); err != nil || out != "tls\n" {
		t.Fatalf("etcdctl get: %v\n%q", err, out)
	}
	if out, err := etcdctlRun(t, ctx, "https://"+a.Etcd, "get", "/auto"); err == nil {
		t.Fatalf("etcdctl verifying the self-signed certificate was served:\n%s", out)
	}
	if out, err := etcdctlRun(t, ctx, "http://"+a.Etcd, "get", "/auto"); err == nil {
		t.Fatalf("etcdctl in plaintext was served:\n%s", out)
	}
	// The HTTP port serves the same certificate.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + a.HTTP + "/health")
	if err != nil {
		t.Fatalf("GET /health over auto TLS: %v", err)
	}
	resp.Body.Close()
	if _, err := os.Stat(filepath.Join(dir, "fixtures", "client", "cert.pem")); err != nil {
		t.Fatalf("the self-signed certificate is not in the data directory: %v", err)
	}
}

// TestHTTPPortOwnCertificate gives the HTTP port a certificate of its own
// without client certificates, while the etcd port requires them: a
// health probe without a certificate is served on the HTTP port, and the
// etcd port still refuses a client without one.
func TestHTTPPortOwnCertificate(t *testing.T) {
	s := newTLSSetup(t)
	httpCA := testcert.NewCA(t, "janus-test-http")
	hf := httpCA.Write(t, httpCA.Issue(t, "janus-http"), s.dir, "http")
	a := startInProcess(t, t.TempDir(), append(s.flags(), "--http-cert-file", hf.Cert, "--http-key-file", hf.Key)...)
	ctx := t.Context()
	pool := poolFromFile(t, hf.CA)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + a.HTTP + "/health")
	if err != nil {
		t.Fatalf("GET /health without a client certificate on the HTTP port's own certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /health: %d", resp.StatusCode)
	}
	if err := clientPut(ctx, a.Etcd, s.clientConfig(t, true)); err == nil {
		t.Fatal("the etcd port served a client without a certificate")
	}
	if err := clientPut(ctx, a.Etcd, s.clientConfig(t, false)); err != nil {
		t.Fatalf("the etcd port with a client certificate: %v", err)
	}
}

func poolFromFile(t *testing.T, name string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM([]byte(readFile(t, name))) {
		t.Fatalf("%s holds no PEM certificate", name)
	}
	return p
}

// TestPeerAutoTLS runs two members with --peer-auto-tls: they form a
// quorum and replicate over TLS with their self-signed certificates, and
// the peer port speaks nothing but TLS (a plaintext hello gets no
// answer and is logged as a failed handshake).
func TestPeerAutoTLS(t *testing.T) {
	peers := fmt.Sprintf("1=%s,2=%s", freeAddr(t), freeAddr(t))
	var nodes []*node
	var logs []*janustest.LogWaiter
	for id := uint64(1); id <= 2; id++ {
		cfg, err := parseFlags([]string{"--data-dir", t.TempDir(), "--id", strconv.FormatUint(id, 10), "--peers", peers,
			"--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
			"--peer-auto-tls", "--election-timeout", "500ms", "--heartbeat-interval", "50ms"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		l := janustest.NewLogWaiter()
		n, err := startNode(cfg, slog.New(slog.NewTextHandler(l, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "fixtures", "peer", "cert.pem")); err != nil {
			t.Fatalf("member %d: no self-signed peer certificate: %v", id, err)
		}
		nodes, logs = append(nodes, n), append(logs, l)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{nodes[0].addrs.Etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	putOnceElected(t, ctx, cli, "/peer-auto-tls", "replicated", "two members over --peer-auto-tls")
	// Both members took part: a quorum of two needs both.
	for i, n := range nodes {
		if st := n.member.Status(); st.LeaderID == 0 {
			t.Errorf("member %d follows no leader", i+1)
		}
	}
	// A plaintext hello on member 1's peer port is not TLS.
	c, err := net.DialTimeout("tcp", strings.Split(strings.Split(peers, ",")[0], "=")[1], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("JZABHI1\x02 plaintext hello, not a TLS record"))
	c.Close()
	logs[0].WaitFor(t, "peer TLS handshake failed")
}
