package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"testing"

	"github.com/januskv/janus/internal/testcert"
)

func TestParseCipherSuites(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []uint16
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", want: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}},
		{in: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", want: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}},
		{in: "TLS_RSA_WITH_RC4_128_SHA", wantErr: true}, // insecure: refused
		{in: "nonsense", wantErr: true},
	} {
		got, err := ParseCipherSuites(tc.in)
		if (err != nil) != tc.wantErr || !equal(got, tc.want) {
			t.Errorf("ParseCipherSuites(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func equal(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReload rotates the server's certificate, then breaks its key file:
// the rotation reaches the next handshake, the broken file does not, and
// neither fails a handshake.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "test-ca")
	first := ca.Issue(t, "first")
	f := ca.Write(t, first, dir, "server")
	src, err := New(Files{Cert: f.Cert, Key: f.Key, CA: f.CA}, Options{ClientCertAuth: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, src.ServerConfig())
	client := ca.Issue(t, "client")
	cf := ca.Write(t, client, dir, "client")
	csrc, err := New(Files{Cert: cf.Cert, Key: cf.Key, CA: cf.CA}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := func() []byte {
		t.Helper()
		c, err := tls.Dial("tcp", addr, csrc.ClientConfig("localhost"))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	if !bytes.Equal(served(), der(t, first)) {
		t.Fatal("the first certificate is not served")
	}
	second := ca.Issue(t, "second")
	ca.Write(t, second, dir, "server")
	if !bytes.Equal(served(), der(t, second)) {
		t.Fatal("the rotated certificate is not served")
	}
	testcert.WriteFile(t, f.Key, []byte("half-written"))
	if !bytes.Equal(served(), der(t, second)) {
		t.Fatal("a broken key file replaced the working pair")
	}
	// Without a client certificate the handshake is refused.
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: csrc.ClientConfig("").RootCAs, ServerName: "localhost"})
	if err == nil {
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}
}

func der(t *testing.T, p testcert.Pair) []byte {
	t.Helper()
	c, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificate[0]
}
