// Package saslmd5 is the server side of the SASL DIGEST-MD5 mechanism
// (RFC 2831) as ZooKeeper servers speak it to Kafka, HBase and other
// clients that log in with a JAAS DigestLoginModule: authentication only
// (qop "auth"), no integrity or privacy layer, one realm, UTF-8.
//
// The exchange has two steps. The client opens with an empty token and
// gets a challenge (realm, nonce, charset, algorithm); it answers with a
// digest-response proving it knows the password, and gets back rspauth,
// proving the server knows it too. A failure at either step ends the
// exchange: a Server is good for one attempt.
package saslmd5

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxResponse is the longest client token accepted, as the JDK's
// DigestMD5Server's MAX_RESPONSE_LENGTH.
const MaxResponse = 4096

// ErrAuth is wrapped by every error that refuses a client: a malformed or
// wrong response, an unknown user, a token out of turn.
var ErrAuth = errors.New("DIGEST-MD5 authentication failed")

// Passwords returns a user's password; ok is false for an unknown user.
type Passwords func(user string) (password string, ok bool)

// Server is one DIGEST-MD5 exchange. It is not safe for concurrent use.
type Server struct {
	realm     string
	digestURI string
	passwords Passwords
	rand      io.Reader

	step  int // 0: expects the empty opening token; 1: the response; 2: done or failed
	nonce string
	user  string
}

// NewServer starts an exchange for service protocol on host serverName
// (ZooKeeper: "zookeeper" and "zk-sasl-md5"); the realm is serverName and
// the client's digest-uri must be protocol/serverName. random supplies the
// nonce (nil: crypto/rand).
func NewServer(protocol, serverName string, passwords Passwords, random io.Reader) *Server {
	if random == nil {
		random = rand.Reader
	}
	return &Server{realm: serverName, digestURI: protocol + "/" + serverName, passwords: passwords, rand: random}
}

// Next takes the client's token and returns the server's answer. done is
// true once the client is authenticated (User then names it); the answer
// is then rspauth, which the client still checks. An error refuses the
// client and ends the exchange.
func (s *Server) Next(token []byte) (answer []byte, done bool, err error) {
	step := s.step
	s.step = 2 // whatever happens, this step is not taken again
	if len(token) > MaxResponse {
		return nil, false, fmt.Errorf("%w: response of %d bytes, over %d", ErrAuth, len(token), MaxResponse)
	}
	switch step {
	case 0:
		if len(token) != 0 {
			return nil, false, fmt.Errorf("%w: initial response not supported", ErrAuth)
		}
		var b [16]byte
		if _, err := io.ReadFull(s.rand, b[:]); err != nil {
			return nil, false, fmt.Errorf("DIGEST-MD5 nonce: %w", err)
		}
		s.nonce = base64.StdEncoding.EncodeToString(b[:])
		s.step = 1
		return []byte(`realm="` + quote(s.realm) + `",nonce="` + s.nonce + `",charset=utf-8,algorithm=md5-sess`), false, nil
	case 1:
		rspauth, user, err := s.verify(token)
		if err != nil {
			return nil, false, err
		}
		s.user = user
		return []byte("rspauth=" + rspauth), true, nil
	}
	return nil, false, fmt.Errorf("%w: exchange already ended", ErrAuth)
}

// User is the authenticated user once Next reported done.
func (s *Server) User() string { return s.user }

// verify checks a digest-response as the JDK's DigestMD5Server does and
// returns the rspauth value and the user.
func (s *Server) verify(token []byte) (string, string, error) {
	d, err := ParseDirectives(token)
	if err != nil {
		return "", "", err
	}
	if cs, ok := d["charset"]; ok && cs != "utf-8" {
		return "", "", fmt.Errorf("%w: charset %q", ErrAuth, cs)
	}
	if mb, ok := d["maxbuf"]; ok {
		if _, err := strconv.ParseInt(mb, 10, 32); err != nil {
			return "", "", fmt.Errorf("%w: maxbuf %q", ErrAuth, mb)
		}
	}
	user, ok := d["username"]
	if !ok {
		return "", "", fmt.Errorf("%w: missing username", ErrAuth)
	}
	if d["realm"] != s.realm {
		return "", "", fmt.Errorf("%w: nonexistent realm %q", ErrAuth, d["realm"])
	}
	if nonce, ok := d["nonce"]; !ok || nonce != s.nonce {
		return "", "", fmt.Errorf("%w: missing or mismatched nonce", ErrAuth)
	}
	cnonce, ok := d["cnonce"]
	if !ok {
		return "", "", fmt.Errorf("%w: missing cnonce", ErrAuth)
	}
	if nc, ok := d["nc"]; ok {
		if n, err := strconv.ParseUint(nc, 16, 32); err != nil || n != 1 {
			return "", "", fmt.Errorf("%w: nonce count %q is not 1", ErrAuth, nc)
		}
	}
	if qop, ok := d["qop"]; ok && qop != "auth" {
		return "", "", fmt.Errorf("%w: qop %q not offered (only auth)", ErrAuth, qop)
	}
	uri, ok := d["digest-uri"]
	if !ok || !strings.EqualFold(uri, s.digestURI) {
		return "", "", fmt.Errorf("%w: digest-uri %q, expecting %q", ErrAuth, uri, s.digestURI)
	}
	got, ok := d["response"]
	if !ok {
		return "", "", fmt.Errorf("%w: missing response", ErrAuth)
	}
	password, known := s.passwords(user)
	if !known {
		return "", "", fmt.Errorf("%w: unknown user %q", ErrAuth, user)
	}
	authzid, hasAuthzid := d["authzid"]
	p := Params{User: user, Realm: s.realm, Password: password, Nonce: s.nonce, CNonce: cnonce,
		DigestURI: uri, Authzid: authzid, HasAuthzid: hasAuthzid}
	want := p.Response("AUTHENTICATE")
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return "", "", fmt.Errorf("%w: wrong response for user %q", ErrAuth, user)
	}
	return p.Response(""), user, nil
}

// Params are the inputs of a response value (RFC 2831 section 2.1.2.1)
// for qop "auth" and nonce count 1.
type Params struct {
	User, Realm, Password string
	Nonce, CNonce         string
	DigestURI             string
	Authzid               string
	HasAuthzid            bool
}

// Response computes the response value: method "AUTHENTICATE" gives the
// client's response directive, "" the server's rspauth.
//
//	A1 = { H( { username, ":", realm, ":", passwd } ), ":", nonce, ":", cnonce [, ":", authzid] }
//	A2 = { method, ":", digest-uri }
//	response = HEX( KD( HEX(H(A1)), { nonce, ":", nc, ":", cnonce, ":", qop, ":", HEX(H(A2)) } ) )
func (p Params) Response(method string) string {
	inner := md5.Sum([]byte(latin1(p.User) + ":" + latin1(p.Realm) + ":" + latin1(p.Password)))
	a1 := string(inner[:]) + ":" + p.Nonce + ":" + p.CNonce
	if p.HasAuthzid {
		a1 += ":" + p.Authzid
	}
	ha1 := md5.Sum([]byte(a1))
	ha2 := md5.Sum([]byte(method + ":" + p.DigestURI))
	kd := md5.Sum([]byte(hex.EncodeToString(ha1[:]) + ":" + p.Nonce + ":00000001:" + p.CNonce + ":auth:" + hex.EncodeToString(ha2[:])))
	return hex.EncodeToString(kd[:])
}

// latin1 converts s (UTF-8) to ISO 8859-1 when every character fits, as
// RFC 2831 asks of username, realm and password under charset=utf-8;
// otherwise s stays UTF-8.
func latin1(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return s
		}
		b = append(b, byte(r))
	}
	return string(b)
}

// quote escapes a value for a quoted-string.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}
