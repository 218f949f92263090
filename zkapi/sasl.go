package zkapi

import (
	"crypto/tls"
	"slices"
	"time"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/saslmd5"
	"github.com/januskv/janus/zkapi/jute"
)

// ZooKeeper's DIGEST-MD5 server runs as service "zookeeper" on host
// "zk-sasl-md5", which is also its realm: clients expect exactly these.
const (
	saslProtocol = "zookeeper"
	saslHost     = "zk-sasl-md5"
)

// sasl answers one step of a SASL exchange (opcode sasl), as ZooKeeper's
// processSasl: the client opens with an empty token, gets the DIGEST-MD5
// challenge, sends its response and gets rspauth, and from then on the
// session holds the identity sasl:<user>. A failed step is AuthFailed
// (SessionClosedRequireSaslAuth when SASL is required) and closes the
// connection; the session lives on, as in ZooKeeper.
func (c *conn) sasl(p *jute.GetSASLRequest) reply {
	users := c.srv.cfg.SASLUsers
	if users == nil {
		// A ZooKeeper without a JAAS login has no SASL server for the
		// connection: it answers Ok with no token, and the client's
		// mechanism fails on its side.
		c.log.Info("SASL request, but no SASL users are configured")
		return reply{body: &jute.SetSASLResponse{}}
	}
	if c.saslServer == nil {
		c.saslServer = saslmd5.NewServer(saslProtocol, saslHost, func(user string) (string, bool) {
			pw, ok := users[user]
			return pw, ok
		}, nil)
	}
	token, done, err := c.saslServer.Next(p.Token)
	if err != nil {
		code := jute.CodeAuthFailed
		if slices.Contains(c.srv.cfg.EnforceAuthSchemes, "sasl") {
			code = jute.CodeSessionClosedRequireSaslAuth
		}
		c.log.Info("closing connection: SASL authentication failed", "err", err)
		// ZooKeeper sends an empty SetSASLResponse with the error, and the
		// Java client reads it: without it the client fails to parse the
		// reply and reconnects instead of reporting AuthFailed.
		return reply{code: code, body: &jute.SetSASLResponse{}, bodyOnError: true, close: true}
	}
	if done {
		user := c.saslServer.User()
		ids := []core.ID{{Scheme: "sasl", ID: user}}
		if super := c.srv.cfg.SASLSuperUser; super != "" && user == super {
			ids = append(ids, core.ID{Scheme: "super", ID: ""})
		}
		c.addIdentities(ids...)
		c.log.Info("SASL authentication succeeded", "user", user)
	}
	return reply{body: &jute.SetSASLResponse{Token: token}}
}

// addIdentities adds identities the session does not hold yet. Requests
// read before keep the identities they were read with, so c.ids is
// replaced, never changed in place. Only the reader calls it.
func (c *conn) addIdentities(ids ...core.ID) {
	c.authMu.Lock()
	for _, id := range ids {
		if !slices.Contains(c.auth, id) {
			c.auth = append(c.auth, id)
		}
	}
	c.authMu.Unlock()
	c.ids = c.identities()
}

// authEnforced reports whether a request other than auth and SASL must be
// refused: enforcement is on and the session holds no identity of an
// enforced scheme yet (ZooKeeper's AuthenticationHelper).
func (c *conn) authEnforced() bool {
	schemes := c.srv.cfg.EnforceAuthSchemes
	return len(schemes) > 0 && !slices.ContainsFunc(schemes, c.hasScheme)
}

// tlsIdentity completes a TLS connection's handshake and, when the client
// presented a certificate that verified, gives the connection the identity
// x509:<subject> (and super, for X509SuperUser), as ZooKeeper's Netty
// server does once the handshake is done. It returns false when the
// connection must end.
func (c *conn) tlsIdentity(tc *tls.Conn) bool {
	_ = tc.SetDeadline(time.Now().Add(c.srv.cfg.MaxSessionTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		c.logReadError(err)
		return false
	}
	_ = tc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return true
	}
	id, err := x509ID(st.PeerCertificates[0])
	if err != nil {
		c.log.Warn("closing connection: unreadable client certificate subject", "err", err)
		return false
	}
	ids := []core.ID{{Scheme: "x509", ID: id}}
	if super := c.srv.cfg.X509SuperUser; super != "" && id == super {
		ids = []core.ID{{Scheme: "super", ID: id}, ids[0]}
	}
	c.authMu.Lock()
	c.auth = append(c.auth, ids...)
	c.authMu.Unlock()
	c.log.Debug("client certificate identity", "x509", id)
	return true
}
