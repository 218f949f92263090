package etcdapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// listenerCreds lets each listener decide its transport security: a
// connection from a TLS listener (tls.NewListener) is handshaken here and
// its certificate state reaches the handlers as credentials.TLSInfo (the
// client certificate is an identity); any other connection, the in-process
// one included, is served as it is. One gRPC server can so serve a TLS
// port, a plaintext port and its own gateway.
type listenerCreds struct{}

var plain = insecure.NewCredentials()

func (listenerCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return plain.ServerHandshake(c)
	}
	// gRPC sets a deadline on c for the handshake (its connection
	// timeout); the TLS handshake honours it.
	if err := tc.HandshakeContext(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("etcdapi: TLS handshake: %w", err)
	}
	st := tc.ConnectionState()
	if st.NegotiatedProtocol != "h2" {
		return nil, nil, errors.New("etcdapi: TLS client did not negotiate h2 (ALPN)")
	}
	return tc, credentials.TLSInfo{State: st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (listenerCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("etcdapi: listenerCreds is for the server side only")
}

func (listenerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "janus-listener"}
}

func (c listenerCreds) Clone() credentials.TransportCredentials { return c }

func (listenerCreds) OverrideServerName(string) error { return nil }
