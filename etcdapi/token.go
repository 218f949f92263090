package etcdapi

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/januskv/janus/core"
)

// DefaultTokenTTL is how long a token stays valid, etcd's default for
// both token kinds (--auth-token-ttl, and JWT's ttl option).
const DefaultTokenTTL = 5 * time.Minute

// TokenProvider issues and reads the tokens Authenticate hands out. A
// token names a user and the auth revision it was issued at: once the
// auth store moves past that revision the token no longer acts (requests
// carrying it are refused with etcd's "revision of auth store is old", and
// clientv3 authenticates again).
type TokenProvider interface {
	assign(st *core.AuthState, user string, now time.Time) (string, error)
	// info returns the user and auth revision a token names, false for a
	// token that is not valid (forged, expired, from an earlier enable).
	info(st *core.AuthState, token string, now time.Time) (user string, rev uint64, ok bool)
}

// NewTokenProvider parses etcd's --auth-token value: "simple" (the
// default, when spec is empty) or
// "jwt,pub-key=FILE,priv-key=FILE,sign-method=METHOD[,ttl=DURATION]". ttl
// is --auth-token-ttl, which simple tokens use.
func NewTokenProvider(spec string, ttl time.Duration) (TokenProvider, error) {
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	parts := strings.Split(spec, ",")
	opts := map[string]string{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("etcdapi: --auth-token option %q is not key=value", p)
		}
		opts[k] = v
	}
	switch parts[0] {
	case "", "simple":
		if len(opts) > 0 {
			return nil, fmt.Errorf("etcdapi: simple tokens take no options")
		}
		return newSimpleTokens(ttl), nil
	case "jwt":
		return newJWTTokens(opts)
	}
	return nil, fmt.Errorf("etcdapi: unknown --auth-token type %q (want simple or jwt)", parts[0])
}

// simpleTokens are opaque to clients, as etcd's simple tokens are, but
// self-contained: the user, the auth revision and a first expiry, signed
// with HMAC-SHA256 under the key the auth store drew when auth was
// enabled. So any member verifies any member's token, and disabling auth
// (or enabling it again) voids them all.
//
// As etcd's simpleTokenTTLKeeper does, a token stays valid for ttl after
// its last use on this member: each member keeps the deadline of every
// token it has seen and moves it on at each use. A token this member has
// not seen (issued by another member, or before a restart) is taken while
// its signed first expiry (issue + ttl) has not passed, and from then on
// kept here. etcd's tokens live per member the same way: one left idle
// on a member for ttl is gone there, and clientv3 authenticates again.
type simpleTokens struct {
	ttl time.Duration

	mu sync.Mutex
	// deadline is each known token's expiry; entries past it are swept
	// at most once per ttl, from the calls themselves (no goroutine).
	deadline  map[string]time.Time
	nextSweep time.Time
}

func newSimpleTokens(ttl time.Duration) *simpleTokens {
	return &simpleTokens{ttl: ttl, deadline: map[string]time.Time{}}
}

const simpleMACBytes = 16

func (t *simpleTokens) assign(st *core.AuthState, user string, now time.Time) (string, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("etcdapi: token nonce: %w", err)
	}
	b := binary.BigEndian.AppendUint64(nil, st.Rev)
	b = binary.BigEndian.AppendUint64(b, uint64(now.Add(t.ttl).UnixMilli()))
	b = append(b, nonce[:]...)
	b = append(b, user...)
	enc := base64.RawURLEncoding
	token := enc.EncodeToString(b) + "." + enc.EncodeToString(tokenMAC(st.TokenKey, b))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	t.deadline[token] = now.Add(t.ttl)
	return token, nil
}

func (t *simpleTokens) info(st *core.AuthState, token string, now time.Time) (string, uint64, bool) {
	p, m, ok := strings.Cut(token, ".")
	if !ok || len(st.TokenKey) == 0 {
		return "", 0, false
	}
	enc := base64.RawURLEncoding
	b, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || len(b) < 24 || !hmac.Equal(mac, tokenMAC(st.TokenKey, b)) {
		return "", 0, false
	}
	if !t.use(token, time.UnixMilli(int64(binary.BigEndian.Uint64(b[8:16]))), now) {
		return "", 0, false
	}
	return string(b[24:]), binary.BigEndian.Uint64(b[:8]), true
}

// use reports whether a verified token is still alive at now, and if so
// moves its deadline to now + ttl. firstExpiry is the one signed into
// the token, which decides for a token this member has not seen: every
// deadline kept here is at or after it, so a token swept after its
// deadline cannot come back through it.
func (t *simpleTokens) use(token string, firstExpiry, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	d, known := t.deadline[token]
	if !known {
		d = firstExpiry
	}
	if !now.Before(d) {
		delete(t.deadline, token)
		return false
	}
	t.deadline[token] = now.Add(t.ttl)
	return true
}

// sweep forgets the tokens whose deadline has passed, at most once per
// ttl, so that the map holds at most the tokens used within two ttls.
// t.mu is held.
func (t *simpleTokens) sweep(now time.Time) {
	if now.Before(t.nextSweep) {
		return
	}
	for tok, d := range t.deadline {
		if !now.Before(d) {
			delete(t.deadline, tok)
		}
	}
	t.nextSweep = now.Add(t.ttl)
}

func tokenMAC(key, b []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(b)
	return h.Sum(nil)[:simpleMACBytes]
}

// jwtTokens are etcd's JWT tokens: claims username, revision and exp,
// signed with the configured key; a member given only the public key
// verifies tokens but cannot issue them.
type jwtTokens struct {
	method     jwt.SigningMethod
	key        any // private key (or HMAC secret) when signing, else public
	verifyKey  any
	ttl        time.Duration
	verifyOnly bool
}

var errVerifyOnly = errors.New("auth: token signing attempted with verify-only key")

func newJWTTokens(opts map[string]string) (*jwtTokens, error) {
	t := &jwtTokens{ttl: DefaultTokenTTL}
	for k := range opts {
		switch k {
		case "sign-method", "pub-key", "priv-key", "ttl":
		default:
			return nil, fmt.Errorf("etcdapi: unknown jwt option %q", k)
		}
	}
	if v := opts["ttl"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("etcdapi: jwt ttl: %w", err)
		}
		t.ttl = d
	}
	t.method = jwt.GetSigningMethod(opts["sign-method"])
	if t.method == nil {
		return nil, fmt.Errorf("etcdapi: jwt sign-method %q: invalid auth signature method", opts["sign-method"])
	}
	read := func(name string) ([]byte, error) {
		if opts[name] == "" {
			return nil, nil
		}
		b, err := os.ReadFile(opts[name])
		if err != nil {
			return nil, fmt.Errorf("etcdapi: jwt %s: %w", name, err)
		}
		return b, nil
	}
	privPEM, err := read("priv-key")
	if err != nil {
		return nil, err
	}
	pubPEM, err := read("pub-key")
	if err != nil {
		return nil, err
	}
	var priv, pub any
	switch t.method.(type) {
	case *jwt.SigningMethodHMAC:
		if len(privPEM) == 0 {
			return nil, errors.New("etcdapi: jwt: missing key data (priv-key)")
		}
		t.key, t.verifyKey = privPEM, privPEM
		return t, nil
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
		priv, pub, err = parseKeys(privPEM, pubPEM, jwt.ParseRSAPrivateKeyFromPEM, jwt.ParseRSAPublicKeyFromPEM)
	case *jwt.SigningMethodECDSA:
		priv, pub, err = parseKeys(privPEM, pubPEM, jwt.ParseECPrivateKeyFromPEM, jwt.ParseECPublicKeyFromPEM)
	case *jwt.SigningMethodEd25519:
		priv, pub, err = parseKeys(privPEM, pubPEM,
			func(b []byte) (ed25519.PrivateKey, error) {
				k, err := jwt.ParseEdPrivateKeyFromPEM(b)
				if err != nil {
					return nil, err
				}
				return k.(ed25519.PrivateKey), nil
			},
			func(b []byte) (ed25519.PublicKey, error) {
				k, err := jwt.ParseEdPublicKeyFromPEM(b)
				if err != nil {
					return nil, err
				}
				return k.(ed25519.PublicKey), nil
			})
	default:
		return nil, fmt.Errorf("etcdapi: jwt: unsupported signing method %s", t.method.Alg())
	}
	if err != nil {
		return nil, err
	}
	t.key, t.verifyKey, t.verifyOnly = priv, pub, priv == nil
	return t, nil
}

// keyPair is what the private key types of every asymmetric method share.
type keyPair interface {
	*rsa.PrivateKey | *ecdsa.PrivateKey | ed25519.PrivateKey
	Public() crypto.PublicKey
}

// parseKeys parses a private and a public key (either may be missing, not
// both) and refuses a pair that does not match, as etcd does. It returns
// the private key (nil when only the public one was given) and the public
// key to verify with.
func parseKeys[Priv keyPair, Pub interface{ Equal(x crypto.PublicKey) bool }](privPEM, pubPEM []byte, parsePriv func([]byte) (Priv, error), parsePub func([]byte) (Pub, error)) (any, any, error) {
	var priv Priv
	var pub Pub
	var havePriv, havePub bool
	if len(privPEM) > 0 {
		k, err := parsePriv(privPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("etcdapi: jwt priv-key: %w", err)
		}
		priv, havePriv = k, true
	}
	if len(pubPEM) > 0 {
		k, err := parsePub(pubPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("etcdapi: jwt pub-key: %w", err)
		}
		pub, havePub = k, true
	}
	switch {
	case !havePriv && !havePub:
		return nil, nil, errors.New("etcdapi: jwt: missing key data")
	case !havePriv:
		return nil, pub, nil
	case havePub && !pub.Equal(priv.Public()):
		return nil, nil, errors.New("etcdapi: jwt: public and private keys don't match")
	}
	return priv, priv.Public(), nil
}

func (t *jwtTokens) assign(st *core.AuthState, user string, now time.Time) (string, error) {
	if t.verifyOnly {
		return "", errVerifyOnly
	}
	tk := jwt.NewWithClaims(t.method, jwt.MapClaims{
		"username": user,
		"revision": st.Rev,
		"exp":      now.Add(t.ttl).Unix(),
	})
	s, err := tk.SignedString(t.key)
	if err != nil {
		return "", fmt.Errorf("etcdapi: sign token: %w", err)
	}
	return s, nil
}

func (t *jwtTokens) info(_ *core.AuthState, token string, now time.Time) (string, uint64, bool) {
	parsed, err := jwt.Parse(token, func(tk *jwt.Token) (any, error) {
		if tk.Method.Alg() != t.method.Alg() {
			return nil, errors.New("invalid signing method")
		}
		return t.verifyKey, nil
	}, jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil || !parsed.Valid {
		return "", 0, false
	}
	claims, ok := parsed.Claims.(jwt.MapClaims)
	if !ok {
		return "", 0, false
	}
	user, ok1 := claims["username"].(string)
	rev, ok2 := claims["revision"].(float64)
	if !ok1 || !ok2 {
		return "", 0, false
	}
	return user, uint64(rev), true
}
