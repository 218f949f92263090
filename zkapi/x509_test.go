package zkapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/testcert"
	"github.com/januskv/janus/zkapi"
)

// serveTLS serves j's ZooKeeper face on a TLS port that requires client
// certificates from ca, as --zk-secure-listen with --client-cert-auth.
func serveTLS(t *testing.T, j *janus, ca *testcert.CA) string {
	t.Helper()
	server := ca.Issue(t, "janus-server")
	pair, err := tls.X509KeyPair(server.Cert, server.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	go func() { _ = j.Server.Serve(tls.NewListener(l, cfg)) }()
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// connectTLS opens a go-zookeeper session over TLS with the certificate
// cert (issued by ca).
func connectTLS(t *testing.T, addr string, ca *testcert.CA, cert testcert.Pair) *zk.Conn {
	t.Helper()
	pair, err := tls.X509KeyPair(cert.Cert, cert.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "127.0.0.1"}
	c, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quietLogger{}),
		zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, cfg)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			return c
		}
	}
	t.Fatal("no session over TLS")
	return nil
}

// TestX509ACL: a client certificate is the identity x509:<subject> from
// the handshake on; a node with an x509 ACL serves that certificate only,
// and the X509SuperUser certificate passes every ACL.
func TestX509ACL(t *testing.T) {
	ca := testcert.NewCA(t, "zk-clients")
	j := startJanus(t, zkapi.Config{X509SuperUser: "CN=admin"})
	addr := serveTLS(t, j, ca)
	alice := connectTLS(t, addr, ca, ca.Issue(t, "alice"))
	bob := connectTLS(t, addr, ca, ca.Issue(t, "bob"))
	admin := connectTLS(t, addr, ca, ca.Issue(t, "admin"))
	plain, _ := connect(t, j.Addr, 10*time.Second)

	aliceOnly := []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: "CN=alice"}}
	if _, err := alice.Create("/x509", []byte("a"), 0, aliceOnly); err != nil {
		t.Fatal(err)
	}
	if data, _, err := alice.Get("/x509"); err != nil || string(data) != "a" {
		t.Errorf("alice get: %q %v", data, err)
	}
	for name, c := range map[string]*zk.Conn{"bob": bob, "plaintext": plain} {
		if _, _, err := c.Get("/x509"); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s get: %v, want NoAuth", name, err)
		}
		if _, err := c.Set("/x509", []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s set: %v, want NoAuth", name, err)
		}
	}
	if _, err := admin.Set("/x509", []byte("by admin"), -1); err != nil {
		t.Errorf("super user set: %v", err)
	}
	// "auth" expands to the certificate's identity.
	if _, err := bob.Create("/x509-auth", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if acl, _, err := bob.GetACL("/x509-auth"); err != nil || len(acl) != 1 || acl[0].Scheme != "x509" || acl[0].ID != "CN=bob" {
		t.Errorf("auth ACL of a certificate session: %+v %v", acl, err)
	}
	// addauth x509 succeeds where the handshake gave the identity.
	if err := alice.AddAuth("x509", nil); err != nil {
		t.Errorf("addauth x509 over TLS: %v", err)
	}
	if _, err := alice.Create("/x509-bad", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: "not a name"}}); !errors.Is(err, zk.ErrInvalidACL) {
		t.Errorf("an x509 ACL that is no X.500 name: %v, want InvalidACL", err)
	}
}
