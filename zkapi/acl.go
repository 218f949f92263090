package zkapi

import (
	"crypto/sha1"
	"encoding/base64"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"golang.org/x/crypto/bcrypt"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// openACL is what a node without an ACL (created through etcd) reports.
var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

// fixupACL validates and expands a requested ACL as ZooKeeper's
// PrepRequestProcessor.fixupACL does: an empty list is invalid, world must
// name anyone, "auth" expands to every authenticated identity of the session
// (and is invalid when there is none), other schemes must be known and their
// ids well formed. Duplicates are dropped, keeping the first.
func fixupACL(acl []jute.ACL, auth []core.ID) ([]core.ACL, bool) {
	if len(acl) == 0 {
		return nil, false
	}
	var out []core.ACL
	add := func(a core.ACL) {
		for _, b := range out {
			if b == a {
				return
			}
		}
		out = append(out, a)
	}
	for _, a := range acl {
		switch a.ID.Scheme {
		case "world":
			if a.ID.ID != "anyone" {
				return nil, false
			}
			add(core.ACL{Perms: core.Perm(a.Perms), ID: core.ID{Scheme: "world", ID: "anyone"}})
		case "auth":
			valid := false
			for _, id := range auth {
				if authenticatedScheme(id.Scheme) {
					valid = true
					add(core.ACL{Perms: core.Perm(a.Perms), ID: id})
				}
			}
			if !valid {
				return nil, false
			}
		case "digest":
			if !validDigestID(a.ID.ID) {
				return nil, false
			}
			add(core.ACL{Perms: core.Perm(a.Perms), ID: core.ID{Scheme: a.ID.Scheme, ID: a.ID.ID}})
		case "ip":
			if !validIPID(a.ID.ID) {
				return nil, false
			}
			add(core.ACL{Perms: core.Perm(a.Perms), ID: core.ID{Scheme: a.ID.Scheme, ID: a.ID.ID}})
		case "sasl":
			if !validSASLID(a.ID.ID) {
				return nil, false
			}
			add(core.ACL{Perms: core.Perm(a.Perms), ID: core.ID{Scheme: a.ID.Scheme, ID: a.ID.ID}})
		case "x509":
			if !validX509ID(a.ID.ID) {
				return nil, false
			}
			add(core.ACL{Perms: core.Perm(a.Perms), ID: core.ID{Scheme: a.ID.Scheme, ID: a.ID.ID}})
		case core.EtcdScheme:
			// An etcd user: with etcd auth on, etcd requests act on
			// znodes as etcd:<user>.
			if a.ID.ID == "" {
				return nil, false
			}
			add(core.ACL{Perms: core.Perm(a.Perms), ID: core.ID{Scheme: a.ID.Scheme, ID: a.ID.ID}})
		default:
			return nil, false
		}
	}
	return out, true
}

// authenticatedScheme reports whether identities of a scheme count for the
// "auth" ACL scheme: ZooKeeper's isAuthenticated is true for digest, x509
// and sasl and false for ip; "super" has no provider there, so a super
// user's "auth" ACL names its other identities only.
func authenticatedScheme(scheme string) bool {
	switch scheme {
	case "digest", "x509", "sasl", core.EtcdScheme:
		return true
	}
	return false
}

// validSASLID mirrors SASLAuthenticationProvider.isValid: the id must be
// a Kerberos name, which refuses only a name with an "@" that is not
// service[/host]@REALM.
func validSASLID(id string) bool {
	if !strings.Contains(id, "@") {
		return true
	}
	name, realm, _ := strings.Cut(id, "@")
	service, host, _ := strings.Cut(name, "/")
	return !strings.ContainsAny(realm, "/@") && !strings.Contains(host, "/") && !strings.ContainsAny(service, "@")
}

// validX509ID approximates X509AuthenticationProvider.isValid, which
// parses the id as an X.500 name (new X500Principal(id)): every comma- or
// plus-separated attribute must be type=value, the type a keyword the JDK
// knows or a dotted OID.
func validX509ID(id string) bool {
	if strings.TrimSpace(id) == "" {
		return false
	}
	for _, ava := range splitUnescaped(id, ",+") {
		typ, _, ok := strings.Cut(ava, "=")
		if !ok || !x500Type(strings.TrimSpace(typ)) {
			return false
		}
	}
	return true
}

// x500Keywords are the attribute type keywords X500Principal parses.
var x500Keywords = []string{"CN", "C", "L", "S", "ST", "O", "OU", "T", "IP", "STREET", "DC",
	"DNQUALIFIER", "DNQ", "SURNAME", "GIVENNAME", "INITIALS", "GENERATION", "EMAIL",
	"EMAILADDRESS", "UID", "SERIALNUMBER"}

func x500Type(typ string) bool {
	if slices.Contains(x500Keywords, strings.ToUpper(typ)) {
		return true
	}
	if len(typ) > 4 && strings.EqualFold(typ[:4], "OID.") {
		typ = typ[4:]
	}
	arcs := strings.Split(typ, ".")
	if len(arcs) < 2 {
		return false
	}
	for _, a := range arcs {
		if _, err := strconv.ParseUint(a, 10, 32); err != nil {
			return false
		}
	}
	return true
}

// splitUnescaped splits s at the separator bytes not escaped by a
// backslash nor inside double quotes.
func splitUnescaped(s, seps string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && strings.IndexByte(seps, c) >= 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// etcdUser checks "user:password" against etcd's auth store, which must be
// enabled, and returns the user. The password is compared with its bcrypt
// hash, as etcd's Authenticate does.
func (s *Server) etcdUser(cred string) (string, bool) {
	user, password, ok := strings.Cut(cred, ":")
	st := s.backend.Auth()
	u := st.User(user)
	if !ok || !st.Enabled || u == nil || u.NoPassword {
		return user, false
	}
	return user, bcrypt.CompareHashAndPassword(u.Password, []byte(password)) == nil
}

// validDigestID mirrors DigestAuthenticationProvider.isValid: Java's
// id.split(":") must give exactly two parts (trailing empty parts dropped).
func validDigestID(id string) bool {
	parts := strings.Split(id, ":")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return len(parts) == 2
}

// validIPID accepts an address or an address/bits prefix.
func validIPID(id string) bool {
	base, bits, hasBits := strings.Cut(id, "/")
	addr, err := netip.ParseAddr(base)
	if err != nil {
		return false
	}
	if !hasBits {
		return true
	}
	n, err := strconv.Atoi(bits)
	return err == nil && n >= 0 && n <= addr.BitLen()
}

// digestID returns the digest identity for "user:password":
// user:base64(sha1(user:password)).
func digestID(userPassword string) (string, bool) {
	user, _, ok := strings.Cut(userPassword, ":")
	if !ok {
		return "", false
	}
	sum := sha1.Sum([]byte(userPassword))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:]), true
}

// toJuteACL converts a node's ACL for getACL; nil means open to everyone.
func toJuteACL(acl []core.ACL) []jute.ACL {
	if acl == nil {
		return openACL
	}
	out := make([]jute.ACL, len(acl))
	for i, a := range acl {
		out[i] = jute.ACL{Perms: int32(a.Perms), ID: jute.ID{Scheme: a.ID.Scheme, ID: a.ID.ID}}
	}
	return out
}

// redactDigests hides digest hashes from a reader with READ but not ADMIN,
// as ZooKeeper's getACL does.
func redactDigests(acl []jute.ACL) []jute.ACL {
	out := make([]jute.ACL, len(acl))
	for i, a := range acl {
		if a.ID.Scheme == "digest" {
			if user, _, ok := strings.Cut(a.ID.ID, ":"); ok {
				a.ID.ID = user + ":x"
			}
		}
		out[i] = a
	}
	return out
}

// userName is what whoAmI shows for an identity: the user part of a
// digest; nothing for super, which has no provider in ZooKeeper.
func userName(id core.ID) string {
	switch id.Scheme {
	case "digest":
		user, _, _ := strings.Cut(id.ID, ":")
		return user
	case "super":
		return ""
	}
	return id.ID
}

// javaSetOrder returns ids in the order ZooKeeper iterates a session's
// authInfo, a set backed by a java.util.concurrent.ConcurrentHashMap: by
// hash bucket, and in insertion order within a bucket. whoAmI lists the
// identities in that order, and the "auth" ACL scheme expands to them in
// it, so clients see the same lists from Janus.
func javaSetOrder(ids []core.ID) []core.ID {
	n := 16 // the default table size; it doubles once 3/4 full
	for len(ids) >= n*3/4 {
		n *= 2
	}
	bucket := func(id core.ID) int {
		// org.apache.zookeeper.data.Id.hashCode, then the map's spread.
		h := int32(37*(37*17+javaStringHash(id.Scheme)) + javaStringHash(id.ID))
		u := uint32(h)
		return int((u ^ u>>16) & 0x7fffffff & uint32(n-1))
	}
	out := slices.Clone(ids)
	slices.SortStableFunc(out, func(a, b core.ID) int { return bucket(a) - bucket(b) })
	return out
}

// javaStringHash is java.lang.String.hashCode: over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}
