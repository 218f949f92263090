package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testcert"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zab"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// tlsSetup is a CA, a server certificate for the client ports and a
// client certificate, written to files.
type tlsSetup struct {
	ca             *testcert.CA
	dir            string
	server, client testcert.Files
}

func newTLSSetup(t *testing.T) tlsSetup {
	t.Helper()
	ca := testcert.NewCA(t, "janus-test-clients")
	dir := t.TempDir()
	return tlsSetup{
		ca:     ca,
		dir:    dir,
		server: ca.Write(t, ca.Issue(t, "janus-server"), dir, "server"),
		client: ca.Write(t, ca.Issue(t, "alice"), dir, "client"),
	}
}

// flags are the server's client TLS flags, with a ZooKeeper TLS port.
func (s tlsSetup) flags() []string {
	return []string{"--cert-file", s.server.Cert, "--key-file", s.server.Key, "--trusted-ca-file", s.server.CA,
		"--client-cert-auth", "--zk-secure-listen", "127.0.0.1:0", "--4lw-whitelist", "srvr,ruok"}
}

// clientConfig is a client's TLS configuration: the client certificate
// (unless noCert) and the CA.
func (s tlsSetup) clientConfig(t *testing.T, noCert bool) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.PEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if !noCert {
		pair, err := tls.LoadX509KeyPair(s.client.Cert, s.client.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// TestTLSOnEveryClientPort runs a node with etcd's client TLS flags and
// --client-cert-auth, and talks to it with both ecosystems' own tools over
// TLS: etcdctl, clientv3, kazoo, zkCli.sh, and HTTPS. A client without a
// certificate, or without TLS, is refused on every TLS port; the
// plaintext ZooKeeper port keeps serving, for clients that move later.
func TestTLSOnEveryClientPort(t *testing.T) {
	s := newTLSSetup(t)
	a := startInProcess(t, t.TempDir(), s.flags()...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// etcdctl with --cacert --cert --key.
	etcdctl := func(withCert bool, args ...string) (string, error) {
		tlsArgs := []string{"--endpoints", "https://" + a.Etcd, "--cacert", s.client.CA, "--dial-timeout", "5s", "--command-timeout", "10s"}
		if withCert {
			tlsArgs = append(tlsArgs, "--cert", s.client.Cert, "--key", s.client.Key)
		}
		out, err := exec.CommandContext(ctx, testenv.EtcdctlPath(t), append(tlsArgs, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := etcdctl(true, "put", "/tls-etcd", "from-etcdctl"); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("etcdctl put over TLS: %v\n%s", err, out)
	}
	if out, err := etcdctl(true, "get", "/tls-etcd"); err != nil || out != "/tls-etcd\nfrom-etcdctl\n" {
		t.Fatalf("etcdctl get over TLS: %v\n%q", err, out)
	}
	if out, err := etcdctl(false, "put", "/tls-etcd", "no-cert"); err == nil {
		t.Fatalf("etcdctl without a client certificate wrote:\n%s", out)
	}

	// clientv3 with a certificate; without one; without TLS.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, TLS: s.clientConfig(t, false), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/tls-clientv3", "v"); err != nil {
		t.Fatalf("clientv3 over TLS: %v", err)
	}
	for name, cfg := range map[string]clientv3.Config{
		"no client certificate": {Endpoints: []string{a.Etcd}, TLS: s.clientConfig(t, true)},
		"plaintext":             {Endpoints: []string{a.Etcd}},
	} {
		c, err := clientv3.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = c.Put(cctx, "/tls-clientv3", name)
		ccancel()
		c.Close()
		if err == nil {
			t.Errorf("clientv3 with %s wrote", name)
		}
	}
	// The refusal is the handshake's, not a timeout's.
	if c, err := tls.Dial("tcp", a.Etcd, s.clientConfig(t, true)); err == nil {
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Errorf("a TLS client without a certificate: %v, want the server's \"certificate required\" alert", err)
		}
	}

	// HTTPS with the client certificate; a client without one refused.
	httpsGet := func(noCert bool, path string) (int, error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: s.clientConfig(t, noCert)}, Timeout: 10 * time.Second}
		resp, err := c.Get("https://" + a.HTTP + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := httpsGet(false, "/health"); err != nil || code != 200 {
		t.Errorf("GET /health over TLS: %d %v", code, err)
	}
	if _, err := httpsGet(true, "/health"); err == nil {
		t.Error("GET /health without a client certificate was served")
	}
	gw := &http.Client{Transport: &http.Transport{TLSClientConfig: s.clientConfig(t, false)}, Timeout: 10 * time.Second}
	resp, err := gw.Post("https://"+a.HTTP+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"L3Rscy1ldGNk"}`)) // /tls-etcd
	if err != nil {
		t.Fatalf("the JSON gateway over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ZnJvbS1ldGNkY3Rs"`) { // from-etcdctl
		t.Errorf("the JSON gateway over TLS: %d %s", resp.StatusCode, body)
	}

	// kazoo over TLS on the ZooKeeper secure port.
	out := testenv.RunPython(t, `
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], use_ssl=True, certfile=sys.argv[2], keyfile=sys.argv[3], ca=sys.argv[4], verify_certs=True)
zk.start(timeout=30)
zk.create("/tls-kazoo", b"from-kazoo")
print(zk.get("/tls-etcd")[0].decode())
# digest over TLS: a node only alice's digest reads, refused to another session
from kazoo.security import make_digest_acl
from kazoo.exceptions import NoAuthError
zk.add_auth("digest", "alice:secret")
zk.create("/tls-alice", b"hers", acl=[make_digest_acl("alice", "secret", all=True)])
other = KazooClient(hosts=sys.argv[1], use_ssl=True, certfile=sys.argv[2], keyfile=sys.argv[3], ca=sys.argv[4], verify_certs=True)
other.start(timeout=30)
try:
    other.get("/tls-alice")
    print("read without auth")
except NoAuthError:
    print(zk.get("/tls-alice")[0].decode())
other.stop()
zk.delete("/tls-alice")
zk.stop()
`, a.ZKSecure, s.client.Cert, s.client.Key, s.client.CA)
	if out != "from-etcdctl\nhers\n" {
		t.Errorf("kazoo over TLS read %q", out)
	}

	// zkCli.sh over TLS, with ZooKeeper's client properties and PEM files
	// (the key store is the certificate and its key in one file).
	keyStore := filepath.Join(s.dir, "client-keystore.pem")
	testcert.WriteFile(t, keyStore, []byte(readFile(t, s.client.Cert)+readFile(t, s.client.Key)))
	jvm := testenv.ZkCliTLSFlags(keyStore, s.client.CA)
	if got := testenv.ZkCliJVM(t, a.ZKSecure, jvm, "get /tls-kazoo"); !strings.Contains(got, "from-kazoo") {
		t.Errorf("zkCli.sh over TLS: %q", got)
	}

	// The ZooKeeper TLS port refuses a client without a certificate, and
	// answers nothing in plaintext.
	if c, err := tls.Dial("tcp", a.ZKSecure, s.clientConfig(t, true)); err == nil {
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Errorf("a ZooKeeper TLS client without a certificate: %v, want the server's \"certificate required\" alert", err)
		}
	}
	// (A fifth byte completes what TLS reads as a record header.)
	if got := fourLetter(t, a.ZKSecure, "srvr\n"); got != "" {
		t.Errorf("srvr in plaintext on the TLS port: %q", got)
	}

	// The plaintext ZooKeeper port still serves: clients move one by one.
	if got := fourLetter(t, a.ZK, "ruok"); got != "imok" {
		t.Errorf("ruok on the plaintext port: %q", got)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// peerFlags are member id's flags in an ensemble of len(peers) members
// with peer TLS, its certificate naming the given names.
func peerFlags(t *testing.T, ca *testcert.CA, id uint64, peers string, names ...string) []string {
	t.Helper()
	f := ca.Write(t, ca.Issue(t, fmt.Sprintf("member %d", id), names...), t.TempDir(), "peer")
	return []string{"--data-dir", t.TempDir(), "--id", strconv.FormatUint(id, 10), "--peers", peers,
		"--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--peer-cert-file", f.Cert, "--peer-key-file", f.Key, "--peer-trusted-ca-file", f.CA,
		"--election-timeout", "500ms", "--heartbeat-interval", "50ms"}
}

// TestPeerCertificateBindsMemberID runs three members with peer TLS where
// the third holds a certificate (from the right CA) naming member 1: the
// other two refuse its connections for it, form the quorum themselves and
// serve writes, and it never takes part.
func TestPeerCertificateBindsMemberID(t *testing.T) {
	ca := testcert.NewCA(t, "janus-test-peers")
	peers := fmt.Sprintf("1=%s,2=%s,3=%s", freeAddr(t), freeAddr(t), freeAddr(t))
	var nodes []*node
	var logs []*janustest.LogWaiter
	for id, names := range map[uint64][]string{1: {zab.PeerCertName(1)}, 2: {zab.PeerCertName(2)}, 3: {zab.PeerCertName(1)}} {
		cfg, err := parseFlags(peerFlags(t, ca, id, peers, names...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		l := janustest.NewLogWaiter()
		n, err := startNode(cfg, slog.New(slog.NewTextHandler(l, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		for len(nodes) < int(id) {
			nodes, logs = append(nodes, nil), append(logs, nil)
		}
		nodes[id-1], logs[id-1] = n, l
	}
	for _, l := range logs[:2] {
		l.WaitFor(t, "peer certificate does not name the member it claims to be", "id=3")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{nodes[0].addrs.Etcd, nodes[1].addrs.Etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	putOnceElected(t, ctx, cli, "/peer-tls", "quorum of two", "members 1 and 2 over peer TLS")
	if st := nodes[2].member.Status(); st.LeaderID != 0 {
		t.Errorf("the impostor follows leader %d", st.LeaderID)
	}
}

// TestCertificateRotationUnderLoad rotates the server's certificate to one
// from a new CA, and its trusted CA file to a bundle of both, while an
// etcd client and a ZooKeeper client write over TLS without pause: no
// client sees an error, connections made after the rotation get the new
// certificate, and a client holding a certificate from the new CA is
// accepted, all without a restart.
func TestCertificateRotationUnderLoad(t *testing.T) {
	s := newTLSSetup(t)
	a := startInProcess(t, t.TempDir(), s.flags()...)
	newCA := testcert.NewCA(t, "janus-test-clients-2")
	// Clients trust both CAs from the start, as a rotation's first step.
	trust := s.clientConfig(t, false)
	trust.RootCAs.AppendCertsFromPEM(newCA.PEM)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, TLS: trust, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	zkc, _, err := zk.Connect([]string{a.ZKSecure}, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, trust)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer zkc.Close()
	if _, err := zkc.Create("/rotate", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}

	// The load: each client writes in a loop until stopped, counting
	// successes; the first error ends the test.
	var etcdOps, zkOps atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for _, load := range []func(i int) error{
		func(i int) error {
			_, err := cli.Put(ctx, "/rotate-etcd", strconv.Itoa(i))
			etcdOps.Add(1)
			return err
		},
		func(i int) error {
			_, err := zkc.Set("/rotate", []byte(strconv.Itoa(i)), -1)
			zkOps.Add(1)
			return err
		},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := load(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// waitOps waits until both clients have made n more writes.
	waitOps := func(n int64) {
		t.Helper()
		e, z := etcdOps.Load(), zkOps.Load()
		for etcdOps.Load() < e+n || zkOps.Load() < z+n {
			select {
			case err := <-errs:
				t.Fatalf("a client failed: %v", err)
			case <-ctx.Done():
				t.Fatal("the load stopped making progress")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitOps(20)

	served := func() *x509.Certificate {
		t.Helper()
		c, err := tls.Dial("tcp", a.Etcd, s.clientConfig(t, false))
		if err != nil && strings.Contains(err.Error(), "unknown authority") {
			c, err = tls.Dial("tcp", a.Etcd, trust)
		}
		if err != nil {
			t.Fatalf("a new connection: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	if got := served().Issuer.CommonName; got != "janus-test-clients" {
		t.Fatalf("before the rotation the server's certificate is from %q", got)
	}
	// Rotate: the new certificate, and both CAs trusted for clients.
	testcert.WriteFile(t, s.server.CA, append(append([]byte{}, s.ca.PEM...), newCA.PEM...))
	next := newCA.Issue(t, "janus-server-2")
	testcert.WriteFile(t, s.server.Key, next.Key)
	testcert.WriteFile(t, s.server.Cert, next.Cert)
	if got := served().Issuer.CommonName; got != "janus-test-clients-2" {
		t.Fatalf("after the rotation a new connection gets a certificate from %q", got)
	}
	waitOps(20)

	// A client with a certificate from the new CA is accepted.
	f := newCA.Write(t, newCA.Issue(t, "bob"), t.TempDir(), "bob")
	bobCfg := trust.Clone()
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	bobCfg.Certificates = []tls.Certificate{pair}
	bob, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, TLS: bobCfg, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if _, err := bob.Put(ctx, "/rotate-bob", "new CA"); err != nil {
		t.Fatalf("a client of the new CA: %v", err)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("a client failed: %v", err)
	default:
	}
	t.Logf("%d etcd and %d ZooKeeper writes over TLS across the rotation, none failed", etcdOps.Load(), zkOps.Load())
}

// TestHTTPPortRefusesWebPages turns the issue's attacks on the HTTP port
// and the four-letter words into tests: with default flags, /debug/pprof
// is not served, a request for a foreign Host (DNS rebinding) is refused,
// a web page's text/plain or cross-origin POST writes nothing, and cons
// and dump (session IDs, client addresses) are not answered.
func TestHTTPPortRefusesWebPages(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	base := "http://" + a.HTTP
	do := func(method, path string, header map[string]string, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	put := `{"key":"L2F0dGFjaw==","value":"cHduZWQ="}` // /attack = pwned
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		body               string
		want               int
	}{
		{"pprof is off by default", "GET", "/debug/pprof/", nil, "", http.StatusNotFound},
		{"a rebound DNS name", "GET", "/health", map[string]string{"Host": "attacker.example"}, "", http.StatusMisdirectedRequest},
		{"a rebound DNS name writing", "POST", "/v3/kv/put", map[string]string{"Host": "attacker.example", "Content-Type": "application/json"}, put, http.StatusMisdirectedRequest},
		{"a form POST from a web page", "POST", "/v3/kv/put", map[string]string{"Content-Type": "text/plain"}, put, http.StatusUnsupportedMediaType},
		{"a cross-origin JSON POST", "POST", "/v3/kv/put", map[string]string{"Content-Type": "application/json", "Origin": "http://attacker.example"}, put, http.StatusForbidden},
		{"localhost is served", "GET", "/health", map[string]string{"Host": "localhost"}, "", http.StatusOK},
	} {
		if code, body := do(tc.method, tc.path, tc.header, tc.body); code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.want)
		}
	}
	// Nothing was written; a JSON POST from no page writes.
	if _, body := do("POST", "/v3/kv/range", map[string]string{"Content-Type": "application/json"}, `{"key":"L2F0dGFjaw=="}`); strings.Contains(body, `"kvs"`) {
		t.Fatalf("an attack wrote: %s", body)
	}
	if code, body := do("POST", "/v3/kv/put", map[string]string{"Content-Type": "application/json"}, put); code != http.StatusOK {
		t.Fatalf("a JSON POST: %d %s", code, body)
	}
	if _, body := do("POST", "/v3/kv/range", map[string]string{"Content-Type": "application/json"}, `{"key":"L2F0dGFjaw=="}`); !strings.Contains(body, `"kvs"`) {
		t.Fatalf("the JSON POST wrote nothing: %s", body)
	}
	for _, w := range []string{"cons", "dump", "envi", "wchc"} {
		if got, want := fourLetter(t, a.ZK, w), w+" is not executed because it is not in the whitelist.\n"; got != want {
			t.Errorf("%s = %q, want %q", w, got, want)
		}
	}
	if got := fourLetter(t, a.ZK, "srvr"); !strings.HasPrefix(got, "Zookeeper version: ") {
		t.Errorf("srvr = %q", got)
	}

	// With --enable-pprof it is served.
	b := startInProcess(t, t.TempDir(), "--enable-pprof")
	if code, _ := getURL(t, "http://"+b.HTTP+"/debug/pprof/"); code != http.StatusOK {
		t.Errorf("/debug/pprof/ with --enable-pprof: %d", code)
	}
}
