package zkapi_test

import (
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/januskv/janus/internal/saslmd5"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// The users of the authentication tests: a digest super user, a digest
// user, and two SASL DIGEST-MD5 users of which admin is the SASL super
// user.
const (
	superCred   = "super:super-secret"
	aliceCred   = "alice:pw"
	saslKafkaPW = "kafka-secret"
	saslAdminPW = "admin-secret"
)

// jaasServer is a ZooKeeper server JAAS file, used as is by both servers.
const jaasServer = `/* the ZooKeeper server's section */
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_kafka="kafka-secret"
    user_admin="admin-secret";
};
// a client section, which the server ignores
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="kafka-secret";
};
`

// superDigest is DigestAuthenticationProvider.generateDigest of cred.
func superDigest(cred string) string {
	user, _, _ := strings.Cut(cred, ":")
	sum := sha1.Sum([]byte(cred))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// writeJAAS writes the server JAAS file and returns its path.
func writeJAAS(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(path, []byte(jaasServer), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// zkAuthJVMFlags start a reference ZooKeeper with the same settings as
// authConfig: the super digest, the JAAS file, the SASL super user, and
// the sasl and x509 providers (Janus always has them).
func zkAuthJVMFlags(jaas string, extra ...string) []string {
	return append([]string{
		"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + superDigest(superCred),
		"-Djava.security.auth.login.config=" + jaas,
		"-Dzookeeper.superUser=admin",
		"-Dzookeeper.authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
		"-Dzookeeper.authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
	}, extra...)
}

func authConfig(t *testing.T, jaas string) zkapi.Config {
	t.Helper()
	users, err := zkapi.ReadJAASUsers(jaas, "Server")
	if err != nil {
		t.Fatal(err)
	}
	return zkapi.Config{SuperDigest: superDigest(superCred), SASLUsers: users, SASLSuperUser: "admin"}
}

// saslLogin runs the DIGEST-MD5 exchange on r and describes each step's
// answer: its error code and, for a token, the directives' names and the
// realm (the nonce and rspauth differ from server to server).
func saslLogin(r *rawClient, user, password string) string {
	r.t.Helper()
	var out []string
	var resp jute.SetSASLResponse
	h := r.call(jute.OpSASL, &jute.GetSASLRequest{Token: []byte{}}, &resp)
	out = append(out, describeSASL(h, resp.Token))
	if h.Err != jute.CodeOk {
		return strings.Join(out, "; ")
	}
	token, err := saslmd5.Respond(resp.Token, user, password, "zookeeper", "zk-sasl-md5", "cnonce-"+user)
	if err != nil {
		return strings.Join(append(out, "client: "+err.Error()), "; ")
	}
	resp = jute.SetSASLResponse{}
	h = r.call(jute.OpSASL, &jute.GetSASLRequest{Token: token}, &resp)
	return strings.Join(append(out, describeSASL(h, resp.Token)), "; ")
}

func describeSASL(h jute.ReplyHeader, token []byte) string {
	if h.Err != jute.CodeOk {
		return fmt.Sprintf("%v zxid %d", h.Err, h.Zxid)
	}
	d, err := saslmd5.ParseDirectives(token)
	if err != nil {
		return fmt.Sprintf("ok, token %q", token)
	}
	var keys []string
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return fmt.Sprintf("ok zxid %d, token %s realm=%q", h.Zxid, strings.Join(keys, ","), d["realm"])
}

// closedAfter reports whether the server closed r's connection. It is
// called where the server is expected to close it, and fails the test if
// neither a frame nor the end of the connection arrives.
func closedAfter(r *rawClient) bool {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := jute.ReadFrame(r.br, 1<<20)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.t.Fatal("the connection neither closed nor answered")
	}
	return err != nil
}

// authSystem is one server with a raw session per identity.
type authSystem struct {
	name     string
	addr     string
	sessions map[string]*rawClient
}

// authUsers are the sessions of an authSystem, in a fixed order.
var authUsers = []string{"anon", "super", "alice", "kafka", "admin"}

func newAuthSystem(t *testing.T, name, addr string) *authSystem {
	s := &authSystem{name: name, addr: addr, sessions: map[string]*rawClient{}}
	for _, u := range authUsers {
		r := dialRaw(t, addr)
		r.handshake(jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
		t.Cleanup(func() { r.call(jute.OpCloseSession, nil, nil) })
		var got string
		switch u {
		case "super":
			got = r.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte(superCred)}, nil).Err.String()
		case "alice":
			got = r.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte(aliceCred)}, nil).Err.String()
		case "kafka":
			got = saslLogin(r, "kafka", saslKafkaPW)
		case "admin":
			got = saslLogin(r, "admin", saslAdminPW)
		}
		if got != "" && !strings.HasPrefix(strings.ToLower(got), "ok") {
			t.Fatalf("%s: log in %s: %s", name, u, got)
		}
		s.sessions[u] = r
	}
	return s
}

// authACLs are the ACLs the generator sets, of every scheme.
var authACLs = [][]jute.ACL{
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}},
	{{Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: superDigest(aliceCred)}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "kafka"}}},
	{{Perms: jute.PermRead, ID: jute.ID{Scheme: "sasl", ID: "kafka"}}, {Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: superDigest(aliceCred)}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "admin"}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth", ID: ""}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: "CN=alice,O=Janus"}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: "notadn"}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: "FOO=bar"}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "kafka@EXAMPLE.COM"}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "a@b@c"}}},
	{{Perms: jute.PermAll, ID: jute.ID{Scheme: "super", ID: ""}}},
}

// authOp runs one random request on both systems' session of one user
// and renders the answer.
func authOp(rng *rand.Rand, base string) (string, func(*authSystem) string) {
	user := authUsers[rng.IntN(len(authUsers))]
	path := fmt.Sprintf("%s/n%d", base, rng.IntN(3))
	if rng.IntN(3) == 0 {
		path += fmt.Sprintf("/k%d", rng.IntN(2))
	}
	aclIdx := rng.IntN(len(authACLs))
	acl := authACLs[aclIdx]
	kind := rng.IntN(8)
	desc := fmt.Sprintf("%s op%d %s acl%d", user, kind, path, aclIdx)
	return desc, func(s *authSystem) string {
		r := s.sessions[user]
		var h jute.ReplyHeader
		var body string
		switch kind {
		case 0, 1:
			var resp jute.CreateResponse
			h = r.call(jute.OpCreate, &jute.CreateRequest{Path: path, Data: []byte(user), ACL: acl}, &resp)
			body = resp.Path
		case 2:
			var resp jute.GetDataResponse
			h = r.call(jute.OpGetData, &jute.GetDataRequest{Path: path}, &resp)
			body = string(resp.Data)
		case 3:
			h = r.call(jute.OpSetData, &jute.SetDataRequest{Path: path, Data: []byte(user), Version: -1}, &jute.SetDataResponse{})
		case 4:
			h = r.call(jute.OpDelete, &jute.DeleteRequest{Path: path, Version: -1}, nil)
		case 5:
			var resp jute.GetACLResponse
			h = r.call(jute.OpGetACL, &jute.GetACLRequest{Path: path}, &resp)
			body = fmt.Sprint(resp.ACL)
		case 6:
			h = r.call(jute.OpSetACL, &jute.SetACLRequest{Path: path, ACL: acl, Version: -1}, &jute.SetACLResponse{})
		case 7:
			var resp jute.GetChildrenResponse
			h = r.call(jute.OpGetChildren, &jute.GetChildrenRequest{Path: path}, &resp)
			slices.Sort(resp.Children)
			body = fmt.Sprint(resp.Children)
		}
		return h.Err.String() + " " + body
	}
}

// TestAuthDifferentialAgainstZooKeeper compares Janus with a real
// ZooKeeper 3.8 started with a super digest, a JAAS server file (SASL
// DIGEST-MD5 users, one of them zookeeper.superUser) and the sasl and
// x509 providers: the logins, whoAmI, then a seeded mix of ACL-protected
// requests by the super user, a digest user, two SASL users and an
// anonymous session, with ACLs of every scheme (valid and not). Seeds:
// ZKAPI_AUTH_SEEDS adds some; a rotating one is logged.
func TestAuthDifferentialAgainstZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper")
	}
	jaas := writeJAAS(t)
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{JVMFlags: zkAuthJVMFlags(jaas)})
	j := startJanus(t, authConfig(t, jaas))
	addrs := map[string]string{"zookeeper": ref.Addr, "janus": j.Addr}

	t.Run("logins", func(t *testing.T) {
		var got [2]string
		for k, name := range []string{"zookeeper", "janus"} {
			var b strings.Builder
			for _, tc := range []struct{ user, pw string }{{"kafka", saslKafkaPW}, {"kafka", "wrong"}, {"nobody", "x"}, {"admin", saslAdminPW}} {
				r := dialRaw(t, addrs[name])
				r.handshake(jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
				login := saslLogin(r, tc.user, tc.pw)
				fmt.Fprintf(&b, "%s/%s: %s", tc.user, tc.pw, login)
				if !strings.Contains(login, "AuthFailed") {
					var who jute.WhoAmIResponse
					h := r.call(jute.OpWhoAmI, nil, &who)
					fmt.Fprintf(&b, " whoAmI %v %v", h.Err, who.ClientInfo)
					// A second exchange on an authenticated connection
					// fails: the mechanism is done.
					fmt.Fprintf(&b, " again: %s", saslLogin(r, tc.user, tc.pw))
				}
				fmt.Fprintf(&b, " closed=%v\n", closedAfter(r))
			}
			for _, tc := range []struct{ scheme, cred string }{{"digest", superCred}, {"digest", "super:wrong"}, {"sasl", "kafka:kafka-secret"}, {"x509", ""}, {"super", "x"}} {
				r := dialRaw(t, addrs[name])
				r.handshake(jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
				h := r.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: tc.scheme, Auth: []byte(tc.cred)}, nil)
				fmt.Fprintf(&b, "addauth %s %s: %v", tc.scheme, tc.cred, h.Err)
				if h.Err == jute.CodeOk {
					var who jute.WhoAmIResponse
					h := r.call(jute.OpWhoAmI, nil, &who)
					fmt.Fprintf(&b, " whoAmI %v %v\n", h.Err, who.ClientInfo)
				} else {
					fmt.Fprintf(&b, " closed=%v\n", closedAfter(r))
				}
			}
			got[k] = b.String()
		}
		if got[0] != got[1] {
			t.Errorf("logins differ:\nzookeeper:\n%s\njanus:\n%s", got[0], got[1])
		}
		t.Logf("logins:\n%s", got[1])
	})

	seeds := []uint64{1, 2, 3}
	for _, f := range strings.Fields(os.Getenv("ZKAPI_AUTH_SEEDS")) {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("ZKAPI_AUTH_SEEDS: %v", err)
		}
		seeds = append(seeds, n)
	}
	if os.Getenv("ZKAPI_AUTH_ROTATE") != "0" {
		seed := uint64(time.Now().UnixNano())
		t.Logf("rotating seed %d (replay with ZKAPI_AUTH_SEEDS=%d ZKAPI_AUTH_ROTATE=0)", seed, seed)
		seeds = append(seeds, seed)
	}
	const ops = 200
	matched := 0
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			systems := []*authSystem{newAuthSystem(t, "zookeeper", ref.Addr), newAuthSystem(t, "janus", j.Addr)}
			base := fmt.Sprintf("/auth%d", seed)
			for _, s := range systems {
				r := s.sessions["anon"]
				if h := r.call(jute.OpCreate, &jute.CreateRequest{Path: base, ACL: authACLs[0]}, &jute.CreateResponse{}); h.Err != jute.CodeOk {
					t.Fatalf("%s: create %s: %v", s.name, base, h.Err)
				}
				var who []string
				for _, u := range authUsers {
					var resp jute.WhoAmIResponse
					s.sessions[u].call(jute.OpWhoAmI, nil, &resp)
					who = append(who, fmt.Sprint(u, resp.ClientInfo))
				}
				t.Logf("%s: whoAmI %v", s.name, who)
			}
			rng := rand.New(rand.NewPCG(seed, seed))
			for i := range ops {
				desc, run := authOp(rng, base)
				a, b := run(systems[0]), run(systems[1])
				if a != b {
					t.Fatalf("seed %d op %d %s:\n  zookeeper: %s\n  janus:     %s", seed, i, desc, a, b)
				}
				matched++
			}
		})
	}
	t.Logf("auth differential: seeds %v, %d ops each, %d matched", seeds, ops, matched)
}

// TestSASLRequiredDifferential compares sessionRequireClientSASLAuth with
// Janus's --zk-enforce-auth-schemes=sasl: a session that has not done
// SASL is refused its first request and closed; a failed login is
// SessionClosedRequireSaslAuth; a SASL session works.
func TestSASLRequiredDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper")
	}
	jaas := writeJAAS(t)
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{JVMFlags: zkAuthJVMFlags(jaas, "-Dzookeeper.sessionRequireClientSASLAuth=true")})
	cfg := authConfig(t, jaas)
	cfg.EnforceAuthSchemes = []string{"sasl"}
	j := startJanus(t, cfg)
	var got [2]string
	for k, addr := range []string{ref.Addr, j.Addr} {
		var b strings.Builder
		session := func() *rawClient {
			r := dialRaw(t, addr)
			r.handshake(jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
			return r
		}
		r := session()
		h := r.call(jute.OpGetData, &jute.GetDataRequest{Path: "/"}, &jute.GetDataResponse{})
		fmt.Fprintf(&b, "anonymous getData: %v zxid %d closed=%v\n", h.Err, h.Zxid, closedAfter(r))
		r = session()
		h = r.call(jute.OpPing, nil, nil)
		fmt.Fprintf(&b, "anonymous ping: %v closed=%v\n", h.Err, closedAfter(r))
		r = session()
		h = r.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte(aliceCred)}, nil)
		h2 := r.call(jute.OpGetData, &jute.GetDataRequest{Path: "/"}, &jute.GetDataResponse{})
		fmt.Fprintf(&b, "digest user: addauth %v, getData %v closed=%v\n", h.Err, h2.Err, closedAfter(r))
		r = session()
		fmt.Fprintf(&b, "wrong password: %s closed=%v\n", saslLogin(r, "kafka", "wrong"), closedAfter(r))
		r = session()
		fmt.Fprintf(&b, "kafka: %s", saslLogin(r, "kafka", saslKafkaPW))
		var resp jute.CreateResponse
		h = r.call(jute.OpCreate, &jute.CreateRequest{Path: "/required", ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "kafka"}}}}, &resp)
		h2 = r.call(jute.OpGetData, &jute.GetDataRequest{Path: "/required"}, &jute.GetDataResponse{})
		fmt.Fprintf(&b, ", create %v %s, getData %v\n", h.Err, resp.Path, h2.Err)
		got[k] = b.String()
	}
	if got[0] != got[1] {
		t.Errorf("differ:\nzookeeper:\n%s\njanus:\n%s", got[0], got[1])
	}
	t.Logf("janus:\n%s", got[1])
}
