package zkapi_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/januskv/janus/internal/testcert"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dialRawTLS is dialRaw over TLS with a client certificate.
func dialRawTLS(t *testing.T, addr string, ca *testcert.CA, cert testcert.Pair) *rawClient {
	t.Helper()
	pair, err := tls.X509KeyPair(cert.Cert, cert.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	nc, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("dial %s over TLS: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// TestX509DifferentialAgainstZooKeeper compares the x509 scheme with a
// ZooKeeper 3.8 serving TLS (Netty, ssl.clientAuth=need, the x509
// provider, an x509 super user): each certificate's whoAmI, a node only
// alice's certificate may use, what bob, the super user and a plaintext
// session get on it, and addauth x509 on both kinds of connection.
func TestX509DifferentialAgainstZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ZooKeeper")
	}
	ca := testcert.NewCA(t, "zk-clients")
	dir := t.TempDir()
	server := ca.Write(t, ca.Issue(t, "zk-server"), dir, "server")
	keyStore := filepath.Join(dir, "server-keystore.pem")
	testcert.WriteFile(t, keyStore, append(readPEM(t, server.Cert), readPEM(t, server.Key)...))
	secure := freePort(t)
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{
		Config: map[string]string{
			"secureClientPort":                     strconv.Itoa(secure),
			"serverCnxnFactory":                    "org.apache.zookeeper.server.NettyServerCnxnFactory",
			"ssl.keyStore.location":                keyStore,
			"ssl.keyStore.type":                    "PEM",
			"ssl.trustStore.location":              server.CA,
			"ssl.trustStore.type":                  "PEM",
			"ssl.clientAuth":                       "need",
			"authProvider.x509":                    "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
			"X509AuthenticationProvider.superUser": "CN=admin",
		},
		// Debian's zookeeper.jar leaves netty-codec and netty-resolver
		// off its class path and testenv's -cp cannot be extended, so
		// all of Netty goes on the boot class path, where every Netty
		// class is then found first.
		JVMFlags: []string{"-Xbootclasspath/a:" + nettyJars,
			"-Dzookeeper.X509AuthenticationProvider.superUser=CN=admin"},
	})
	j := startJanus(t, zkapi.Config{X509SuperUser: "CN=admin"})
	janusTLS := serveTLS(t, j, ca)
	certs := map[string]testcert.Pair{}
	for _, cn := range []string{"alice", "bob", "admin"} {
		certs[cn] = ca.Issue(t, cn)
	}
	var got [2]string
	for k, addrs := range [][2]string{{"127.0.0.1:" + strconv.Itoa(secure), ref.Addr}, {janusTLS, j.Addr}} {
		var b strings.Builder
		sessions := map[string]*rawClient{}
		for _, cn := range []string{"alice", "bob", "admin"} {
			r := dialRawTLS(t, addrs[0], ca, certs[cn])
			r.handshake(jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
			t.Cleanup(func() { r.call(jute.OpCloseSession, nil, nil) })
			sessions[cn] = r
		}
		plain := dialRaw(t, addrs[1])
		plain.handshake(jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
		sessions["plain"] = plain
		for _, who := range []string{"alice", "bob", "admin", "plain"} {
			var resp jute.WhoAmIResponse
			h := sessions[who].call(jute.OpWhoAmI, nil, &resp)
			fmt.Fprintf(&b, "%s whoAmI: %v %v\n", who, h.Err, resp.ClientInfo)
		}
		for _, acl := range [][]jute.ACL{
			{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: "CN=alice"}}},
			{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth"}}},
		} {
			path := "/x509-" + acl[0].ID.Scheme
			h := sessions["alice"].call(jute.OpCreate, &jute.CreateRequest{Path: path, Data: []byte("a"), ACL: acl}, &jute.CreateResponse{})
			fmt.Fprintf(&b, "alice create %s: %v\n", path, h.Err)
			for _, who := range []string{"alice", "bob", "admin", "plain"} {
				var resp jute.GetDataResponse
				h := sessions[who].call(jute.OpGetData, &jute.GetDataRequest{Path: path}, &resp)
				var acls jute.GetACLResponse
				h2 := sessions[who].call(jute.OpGetACL, &jute.GetACLRequest{Path: path}, &acls)
				fmt.Fprintf(&b, "%s get %s: %v %q, getACL %v %v\n", who, path, h.Err, resp.Data, h2.Err, acls.ACL)
			}
		}
		h := sessions["bob"].callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "x509"}, nil)
		fmt.Fprintf(&b, "bob addauth x509: %v\n", h.Err)
		h = plain.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "x509"}, nil)
		fmt.Fprintf(&b, "plaintext addauth x509: %v closed=%v\n", h.Err, closedAfter(plain))
		got[k] = b.String()
	}
	if got[0] != got[1] {
		t.Errorf("x509 differs:\nzookeeper:\n%s\njanus:\n%s", got[0], got[1])
	}
	t.Logf("janus:\n%s", got[1])
}

// nettyJars are the Netty jars ZooKeeper's Netty server uses.
const nettyJars = "/usr/share/java/netty-buffer.jar:/usr/share/java/netty-codec.jar:/usr/share/java/netty-common.jar:" +
	"/usr/share/java/netty-handler.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-transport.jar:" +
	"/usr/share/java/netty-transport-native-epoll.jar:/usr/share/java/netty-transport-native-unix-common.jar"

func readPEM(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
