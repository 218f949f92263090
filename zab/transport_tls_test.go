package zab

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/januskv/janus/internal/testcert"
	"github.com/januskv/janus/internal/tlsfiles"
)

// peerTLS is member id's mutual TLS, with a certificate from ca naming
// the given names.
func peerTLS(t *testing.T, ca *testcert.CA, id uint64, names ...string) *PeerTLS {
	t.Helper()
	f := ca.Write(t, ca.Issue(t, PeerCertName(id), names...), t.TempDir(), "peer")
	src, err := tlsfiles.New(tlsfiles.Files{Cert: f.Cert, Key: f.Key, CA: f.CA}, tlsfiles.Options{ClientCertAuth: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &PeerTLS{Server: src.ServerConfig(), Client: src.ClientConfig}
}

// Members talk over mutual TLS, and a connection whose certificate does
// not name the member it claims to be never delivers a message.
func TestTCPTransportTLS(t *testing.T) {
	ca := testcert.NewCA(t, "peers")
	peers := map[uint64]string{1: listenAddr(t), 2: listenAddr(t), 3: listenAddr(t)}
	a, err := NewTCPTransport(TCPConfig{ID: 1, Listen: peers[1], Peers: peers, TLS: peerTLS(t, ca, 1, PeerCertName(1))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewTCPTransport(TCPConfig{ID: 2, Listen: peers[2], Peers: peers, TLS: peerTLS(t, ca, 2, PeerCertName(2))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.Send(2, Message{Type: MsgAck, Index: 1})
	if env := recvT(t, b); env.From != 1 || env.Msg.Index != 1 {
		t.Fatalf("over TLS: %+v", env)
	}

	other := testcert.NewCA(t, "another CA")
	for _, tc := range []struct {
		name  string
		cert  *PeerTLS // nil: no client certificate
		claim uint64
	}{
		{"certificate of member 3 claiming member 1", peerTLS(t, ca, 3, PeerCertName(3)), 1},
		{"certificate naming no member", peerTLS(t, ca, 3), 3},
		{"certificate naming two members", peerTLS(t, ca, 3, PeerCertName(3), PeerCertName(1)), 3},
		{"certificate from another CA", peerTLS(t, other, 1, PeerCertName(1)), 1},
		{"no certificate", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{ServerName: PeerCertName(2), RootCAs: peerTLS(t, ca, 9).Client("").RootCAs}
			if tc.cert != nil {
				cfg = tc.cert.Client(PeerCertName(2))
				cfg.RootCAs = peerTLS(t, ca, 9).Client("").RootCAs
			}
			raw, err := net.Dial("tcp", peers[2])
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			c := tls.Client(raw, cfg)
			raw.SetDeadline(time.Now().Add(30 * time.Second))
			// The impostor's hello and a message; the server must close
			// the connection without delivering it.
			hello := appendFrame(nil, append([]byte(helloMagic), byte(tc.claim)))
			m := Message{Type: MsgCommit, Commit: 666}
			if _, err := c.Write(append(hello, encodeFrame(nil, &m)...)); err == nil {
				_, err = c.Read(make([]byte, 1))
				if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
					t.Fatal("the connection stayed open")
				}
			}
			a.Send(2, Message{Type: MsgCommit, Commit: 7})
			if env := recvT(t, b); env.From != 1 || env.Msg.Commit != 7 {
				t.Fatalf("received %+v from an impostor", env)
			}
		})
	}

	// A listener at member 2's address holding member 3's certificate is
	// not member 2: member 1's dial to it fails at the handshake.
	b.Close()
	imp, err := NewTCPTransport(TCPConfig{ID: 2, Listen: peers[2], Peers: peers, TLS: peerTLS(t, ca, 3, PeerCertName(3))})
	if err != nil {
		t.Fatal(err)
	}
	defer imp.Close()
	raw, err := net.Dial("tcp", peers[2])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := a.startConn(raw, 2); err == nil {
		t.Fatal("member 1 accepted member 3's certificate as member 2")
	} else {
		t.Logf("refused as it should be: %v", err)
	}
}
