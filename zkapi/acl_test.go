package zkapi_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/zkapi"
	"github.com/januskv/janus/zkapi/jute"
)

func TestDigestACL(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	bob, _ := connect(t, j.Addr, 10*time.Second)
	anon, _ := connect(t, j.Addr, 10*time.Second)
	if err := bob.AddAuth("digest", []byte("bob:secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Create("/secret", []byte("s"), 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	acl, _, err := bob.GetACL("/secret")
	if err != nil || len(acl) != 1 || acl[0].Scheme != "digest" || acl[0].ID != "bob:"+mustDigest("bob:secret") {
		t.Fatalf("getACL = %+v, %v", acl, err)
	}
	if _, _, err := anon.Get("/secret"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous get: %v", err)
	}
	if _, err := anon.Create("/secret/kid", nil, 0, openACL); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous create under: %v", err)
	}
	if ok, _, err := anon.Exists("/secret"); !ok || err != nil {
		t.Errorf("exists is never ACL-checked: %v, %v", ok, err)
	}
	// READ without ADMIN sees the digest redacted.
	if _, err := bob.SetACL("/secret", []zk.ACL{{Perms: zk.PermRead, Scheme: "world", ID: "anyone"}, {Perms: zk.PermAll, Scheme: "digest", ID: "bob:" + mustDigest("bob:secret")}}, 0); err != nil {
		t.Fatal(err)
	}
	acl, _, err = anon.GetACL("/secret")
	if err != nil || len(acl) != 2 || acl[1].ID != "bob:x" {
		t.Errorf("redacted getACL = %+v, %v", acl, err)
	}
	if _, err := bob.SetACL("/secret", openACL, 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Errorf("setACL stale aversion: %v", err)
	}
}

func mustDigest(userPassword string) string {
	d := zk.DigestACL(zk.PermAll, strings.Split(userPassword, ":")[0], strings.Split(userPassword, ":")[1])
	return strings.SplitN(d[0].ID, ":", 2)[1]
}

func TestUnknownAuthSchemeClosesConnection(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	c := dialRaw(t, j.Addr)
	c.handshake(jute.ConnectRequest{TimeOut: 10000})
	h := c.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "kerberos", Auth: []byte("x")}, nil)
	if h.Err != jute.CodeAuthFailed {
		t.Errorf("unknown scheme: %v", h.Err)
	}
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := jute.ReadFrame(c.br, 1<<20); err == nil {
		t.Error("connection still open after AuthFailed")
	}
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	j := startJanus(t, zkapi.Config{})
	good, _ := connect(t, j.Addr, 10*time.Second)

	// An unknown opcode: Unimplemented with zxid -1, then the connection closes.
	c := dialRaw(t, j.Addr)
	c.handshake(jute.ConnectRequest{TimeOut: 10000})
	h := c.call(jute.OpCode(77), nil, nil)
	if h.Err != jute.CodeUnimplemented || h.Zxid != -1 {
		t.Errorf("unknown opcode reply %+v", h)
	}
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := jute.ReadFrame(c.br, 1<<20); err == nil {
		t.Error("connection open after unknown opcode")
	}

	// An oversized frame closes the connection without a reply.
	big := dialRaw(t, j.Addr)
	big.handshake(jute.ConnectRequest{TimeOut: 10000})
	var prefix [4]byte
	binary.BigEndian.PutUint32(prefix[:], jute.DefaultMaxBuffer+1)
	big.nc.Write(prefix[:])
	big.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(big.nc); err != nil {
		t.Errorf("oversized frame: %v", err)
	}

	// A malformed body is MarshallingError and the connection lives on.
	m := dialRaw(t, j.Addr)
	m.handshake(jute.ConnectRequest{TimeOut: 10000})
	if h := m.call(jute.OpGetData, truncatedPath{}, nil); h.Err != jute.CodeMarshallingError {
		t.Errorf("malformed body: %v", h.Err)
	}
	var ex jute.ExistsResponse
	if h := m.call(jute.OpExists, &jute.ExistsRequest{Path: "/"}, &ex); h.Err != jute.CodeOk {
		t.Errorf("after malformed body: %v", h.Err)
	}

	if _, err := good.Create("/still-fine", nil, 0, openACL); err != nil {
		t.Errorf("other session after bad input: %v", err)
	}
}

func TestFourLetterWordsAndAdmin(t *testing.T) {
	j := startJanus(t, zkapi.Config{FourLetterWhitelist: []string{"ruok", "srvr", "conf", "mntr"}})
	word := func(cmd string) string {
		nc, err := net.Dial("tcp", j.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte(cmd))
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		out, _ := io.ReadAll(nc)
		return string(out)
	}
	tests := []struct{ cmd, want string }{
		{"ruok", "imok"},
		{"srvr", "Mode: standalone"},
		{"conf", "maxSessionTimeout=40000"},
		{"mntr", "zk_znode_count\t5"}, // ZooKeeper counts the root as "" and "/"
		{"stat", "stat is not executed because it is not in the whitelist."},
	}
	for _, tt := range tests {
		if got := word(tt.cmd); !strings.Contains(got, tt.want) {
			t.Errorf("%s = %q, want it to contain %q", tt.cmd, got, tt.want)
		}
	}
	srv := httptest.NewServer(j.Server.AdminHandler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/commands/ruok")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"command": "ruok"`) {
		t.Errorf("admin ruok: %d %s", resp.StatusCode, body)
	}
	// srvr as ZooKeeper's AdminServer shapes it: the ServerStats bean
	// under server_stats, node_count beside it.
	resp, err = srv.Client().Get(srv.URL + "/commands/srvr")
	if err != nil {
		t.Fatal(err)
	}
	var srvr struct {
		Command     string `json:"command"`
		NodeCount   int    `json:"node_count"`
		ServerStats struct {
			ServerState     string `json:"server_state"`
			PacketsReceived int64  `json:"packets_received"`
		} `json:"server_stats"`
	}
	err = json.NewDecoder(resp.Body).Decode(&srvr)
	resp.Body.Close()
	if err != nil || srvr.Command != "server_stats" || srvr.NodeCount != 5 || srvr.ServerStats.ServerState != "standalone" || srvr.ServerStats.PacketsReceived == 0 {
		t.Errorf("admin srvr: %+v, %v", srvr, err)
	}
}

// truncatedPath is a request body whose path length prefix claims more
// bytes than follow.
type truncatedPath struct{}

func (truncatedPath) Encode(e *jute.Encoder) { e.Int32(100); e.Bool(true) }
func (truncatedPath) Decode(*jute.Decoder)   {}
