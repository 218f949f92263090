package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/januskv/janus/internal/testcert"
)

// serve accepts TLS connections on a loopback port with cfg, completes
// each handshake and writes one byte, until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte{1})
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// served reports whether a client with cfg gets the server's byte: a
// TLS 1.3 server refuses a client certificate after the client's side of
// the handshake is done, so only the first read tells.
func served(addr string, cfg *tls.Config) error {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	return err
}

// TestRevokedClientCertificate checks --client-crl-file: a client whose
// certificate the CRL lists is refused at the handshake, another from the
// same CA is served, and a CRL rewritten to list the second one takes
// effect at the next handshake.
func TestRevokedClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "ca")
	sf := ca.Write(t, ca.Issue(t, "server"), dir, "server")
	good, bad := ca.Issue(t, "good"), ca.Issue(t, "bad")
	crl := filepath.Join(dir, "crl.pem")
	testcert.WriteFile(t, crl, ca.CRL(t, bad))
	src, err := New(Files{Cert: sf.Cert, Key: sf.Key, CA: sf.CA, CRL: crl}, Options{ClientCertAuth: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, src.ServerConfig())
	client := func(p testcert.Pair, name string) *tls.Config {
		f := ca.Write(t, p, dir, name)
		c, err := New(Files{Cert: f.Cert, Key: f.Key, CA: f.CA}, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.ClientConfig("localhost")
	}
	goodCfg, badCfg := client(good, "good"), client(bad, "bad")
	if err := served(addr, goodCfg); err != nil {
		t.Fatalf("a client with a certificate the CRL does not list: %v", err)
	}
	if err := served(addr, badCfg); err == nil {
		t.Fatal("a client with a revoked certificate was served")
	}
	testcert.WriteFile(t, crl, ca.CRL(t, good))
	if err := served(addr, goodCfg); err == nil {
		t.Fatal("a certificate revoked by a rewritten CRL was still served")
	}
	if err := served(addr, badCfg); err != nil {
		t.Fatalf("a certificate the rewritten CRL no longer lists: %v", err)
	}
	// Dialing (as a member dials a peer), a CRL refuses a revoked server.
	peerCRL := filepath.Join(dir, "peer.crl")
	testcert.WriteFile(t, peerCRL, ca.CRL(t, bad))
	gf := ca.Write(t, good, dir, "good")
	dialer, err := New(Files{Cert: gf.Cert, Key: gf.Key, CA: gf.CA, CRL: peerCRL}, Options{ClientCertAuth: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bf := ca.Write(t, bad, dir, "bad")
	revokedServer, err := New(Files{Cert: bf.Cert, Key: bf.Key, CA: bf.CA}, Options{ClientCertAuth: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := served(serve(t, revokedServer.ServerConfig()), dialer.ClientConfig("localhost")); err == nil {
		t.Fatal("a dialer with a CRL accepted a server whose certificate it lists")
	}
	// A CRL that does not parse stops the start, as a bad certificate does.
	junk := filepath.Join(dir, "junk.crl")
	if err := os.WriteFile(junk, []byte("not a CRL"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Files{Cert: sf.Cert, Key: sf.Key, CA: sf.CA, CRL: junk}, Options{}, nil); err == nil {
		t.Fatal("a CRL file that does not parse was accepted")
	}
}

// TestVersionBounds checks --tls-min-version and --tls-max-version: a
// server capped at TLS 1.2 refuses a TLS 1.3-only client, one held to 1.3
// refuses a 1.2-only client, and the defaults take both; and the
// combinations etcd refuses are refused.
func TestVersionBounds(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "ca")
	sf := ca.Write(t, ca.Issue(t, "server"), dir, "server")
	for _, tc := range []struct {
		name           string
		minV, maxV     uint16
		client12, to13 bool // whether a 1.2-only and a 1.3-only client are served
	}{
		{"defaults", 0, 0, true, true},
		{"max TLS1.2", 0, tls.VersionTLS12, true, false},
		{"min TLS1.3", tls.VersionTLS13, 0, false, true},
		{"exactly TLS1.2", tls.VersionTLS12, tls.VersionTLS12, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := New(Files{Cert: sf.Cert, Key: sf.Key}, Options{MinVersion: tc.minV, MaxVersion: tc.maxV}, nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, src.ServerConfig())
			for _, c := range []struct {
				v    uint16
				want bool
			}{{tls.VersionTLS12, tc.client12}, {tls.VersionTLS13, tc.to13}} {
				cfg := &tls.Config{RootCAs: poolOf(t, ca), ServerName: "localhost", MinVersion: c.v, MaxVersion: c.v}
				// A version refusal ends the handshake itself.
				conn, err := tls.Dial("tcp", addr, cfg)
				if err == nil {
					conn.Close()
				}
				if (err == nil) != c.want {
					t.Errorf("a client speaking only %s: error %v, want served=%v", tls.VersionName(c.v), err, c.want)
				}
			}
		})
	}
	for _, tc := range []struct {
		minS, maxS, ciphers string
		wantErr             string
	}{
		{"TLS1.3", "TLS1.2", "", "min version (TLS1.3) is greater than max version (TLS1.2)"},
		{"TLS1.3", "", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "cipher suites cannot be configured when only TLS1.3 is enabled"},
		{"TLS1.2", "TLS1.3", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", ""},
		{"TLS1.1", "", "", `unexpected TLS version "TLS1.1" (must be one of: TLS1.2, TLS1.3)`},
	} {
		minV, err1 := ParseVersion(tc.minS)
		maxV, err2 := ParseVersion(tc.maxS)
		ciphers, err3 := ParseCipherSuites(tc.ciphers)
		err := err1
		if err == nil {
			err = err2
		}
		if err == nil && err3 == nil {
			err = CheckVersions(minV, maxV, ciphers)
		}
		if got := errString(err); got != tc.wantErr {
			t.Errorf("min %q max %q ciphers %q: %q, want %q", tc.minS, tc.maxS, tc.ciphers, got, tc.wantErr)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSelfCert checks --auto-tls's certificate: made once in its
// directory, the same at the next start, serving TLS that a client
// reaches only by not verifying it.
func TestSelfCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fixtures", "client")
	f, err := SelfCert(dir, []string{"127.0.0.1:0", "janus.example:2379"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(f.Cert)
	if err != nil {
		t.Fatal(err)
	}
	again, err := SelfCert(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(again.Cert)
	if err != nil || string(first) != string(second) {
		t.Fatalf("a restart made a new certificate (%v)", err)
	}
	src, err := New(f, Options{SelfSigned: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, src.ServerConfig())
	if err := served(addr, src.ClientConfig("127.0.0.1")); err != nil {
		t.Fatalf("a client not verifying the self-signed certificate: %v", err)
	}
	if err := served(addr, &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		t.Fatal("a verifying client accepted a self-signed certificate")
	}
	leaf := mustLeaf(t, f)
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "janus.example" {
		t.Fatalf("self-signed certificate names %v %v, want 127.0.0.1 and janus.example", leaf.IPAddresses, leaf.DNSNames)
	}
}

func poolOf(t *testing.T, ca *testcert.CA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(ca.PEM) {
		t.Fatal("CA PEM")
	}
	return p
}

func mustLeaf(t *testing.T, f Files) *x509.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}
