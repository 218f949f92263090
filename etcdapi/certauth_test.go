package etcdapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// TestCertCommonNameIsTheUser checks the --client-cert-auth hook: the
// common name of a verified client certificate names the user, an
// unverified one or a request the JSON gateway relays names none. (The
// TLS listener itself is configured elsewhere; this reads what gRPC puts
// in the request's peer.)
func TestCertCommonNameIsTheUser(t *testing.T) {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}
	withPeer := func(state tls.ConnectionState, md metadata.MD) context.Context {
		ctx := peer.NewContext(context.Background(), &peer.Peer{
			Addr:     &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1},
			AuthInfo: credentials.TLSInfo{State: state},
		})
		if md != nil {
			ctx = metadata.NewIncomingContext(ctx, md)
		}
		return ctx
	}
	cases := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"verified chain", withPeer(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}, nil), "alice"},
		{"presented but not verified", withPeer(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}, nil), ""},
		{"relayed by the gateway", withPeer(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}, metadata.Pairs("grpcgateway-accept", "application/json")), ""},
		{"plaintext", peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}}), ""},
		{"no peer", context.Background(), ""},
	}
	for _, c := range cases {
		if got := certCommonName(c.ctx); got != c.want {
			t.Errorf("%s: user %q, want %q", c.name, got, c.want)
		}
	}
}
