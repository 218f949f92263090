package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/januskv/janus/internal/cluster"
)

// binary is the janus binary the tests run, built once by TestMain: the
// console is tested on the real server, through its HTTP port.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "janus-console-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	binary, err = cluster.Build(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// janus is one running server with a client of each face.
type janus struct {
	c    *cluster.Cluster
	base string // http://host:port of the HTTP port
	etcd *clientv3.Client
}

func start(t *testing.T, nodes int, args ...string) *janus {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Binary: binary, Nodes: nodes, Args: args})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.EtcdEndpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &janus{c: c, base: "http://" + c.Nodes[0].HTTPAddr, etcd: cli}
}

// zkConn connects a go-zookeeper client to node i.
func (j *janus) zkConn(t *testing.T, i int) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{j.c.Nodes[i].ZKAddr}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// get calls the console API and decodes its JSON into out; it returns
// the status code.
func (j *janus) get(t *testing.T, token, path string, q url.Values, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, j.base+"/ui/api/"+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode
}

// node is /ui/api/node's answer, as far as the tests read it.
type node struct {
	Exists bool `json:"exists"`
	IsPath bool `json:"isPath"`
	Etcd   *struct {
		Value          string `json:"value"`
		CreateRevision int64  `json:"create_revision"`
		ModRevision    int64  `json:"mod_revision"`
		Version        int64  `json:"version"`
		Lease          int64  `json:"lease,string"`
	} `json:"etcd"`
	ZK *struct {
		Stat struct {
			Czxid, Mzxid, Pzxid  int64
			EphemeralOwner       int64 `json:",string"`
			Version, NumChildren int32
		} `json:"stat"`
		ACL []struct {
			Perms, Scheme, ID string
		} `json:"acl"`
		Mode     string `json:"mode"`
		Implicit bool   `json:"implicit"`
	} `json:"zk"`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestAPIShowsBothViews writes through both faces and checks that the
// node API reports what each client reads: etcd's KeyValue and
// ZooKeeper's Stat and ACL, implicit parents, ephemerals and keys only etcd
// sees.
func TestAPIShowsBothViews(t *testing.T) {
	j := start(t, 1)
	ctx := t.Context()
	put, err := j.etcd.Put(ctx, "/app/config/db", `{"host":"db1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.etcd.Put(ctx, "etcd-only", "x"); err != nil {
		t.Fatal(err)
	}
	conn := j.zkConn(t, 0)
	if _, err := conn.Create("/app/workers", []byte("w"), 0, zk.DigestACL(zk.PermAll, "alice", "secret")); err != nil {
		t.Fatal(err)
	}
	eph, err := conn.Create("/app/member-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, zkStat, err := conn.Get("/app/config/db")
	if err != nil {
		t.Fatal(err)
	}

	var n node
	j.get(t, "", "node", url.Values{"path": {"/app/config/db"}}, &n)
	if n.Etcd == nil || n.ZK == nil {
		t.Fatalf("/app/config/db: want both views, got %+v", n)
	}
	if n.Etcd.Value != b64(`{"host":"db1"}`) || n.Etcd.ModRevision != put.Header.Revision || n.Etcd.Version != 1 {
		t.Errorf("etcd view %+v, want the value written at revision %d, version 1", n.Etcd, put.Header.Revision)
	}
	if n.ZK.Stat.Czxid != zkStat.Czxid || n.ZK.Stat.Mzxid != zkStat.Mzxid || n.ZK.Stat.Version != zkStat.Version || n.ZK.Stat.Pzxid != zkStat.Pzxid {
		t.Errorf("ZooKeeper view %+v, want the Stat a client reads: %+v", n.ZK.Stat, zkStat)
	}

	var parent node
	j.get(t, "", "node", url.Values{"path": {"/app/config"}}, &parent)
	if !parent.Exists || parent.Etcd != nil || parent.ZK == nil || !parent.ZK.Implicit {
		t.Errorf("/app/config: want an implicit parent (ZooKeeper only), got %+v", parent)
	}

	var w node
	j.get(t, "", "node", url.Values{"path": {"/app/workers"}}, &w)
	if w.ZK == nil || len(w.ZK.ACL) != 1 || w.ZK.ACL[0].Scheme != "digest" || w.ZK.ACL[0].Perms != "cdrwa" {
		t.Errorf("/app/workers ACL: got %+v, want one digest entry with cdrwa", w.ZK)
	}

	var e node
	j.get(t, "", "node", url.Values{"path": {eph}}, &e)
	if e.Etcd == nil || e.Etcd.Lease != conn.SessionID() || e.ZK.Stat.EphemeralOwner != conn.SessionID() {
		t.Errorf("%s: want lease and ephemeralOwner %d, got %+v", eph, conn.SessionID(), e)
	}

	var root struct {
		Total    int `json:"total"`
		Children []struct {
			Name             string
			Implicit, System bool
		}
	}
	j.get(t, "", "children", url.Values{"path": {"/"}}, &root)
	kinds := map[string]string{}
	for _, c := range root.Children {
		kinds[c.Name] = fmt.Sprintf("implicit=%v system=%v", c.Implicit, c.System)
	}
	// (The harness writes its own readiness key at the root too.)
	if root.Total != len(root.Children) || kinds["app"] != "implicit=true system=false" || kinds["zookeeper"] != "implicit=false system=true" {
		t.Errorf("root's children: %+v, want app implicit and zookeeper a system node", root)
	}

	var k node
	j.get(t, "", "node", url.Values{"key": {"etcd-only"}}, &k)
	if !k.Exists || k.IsPath || k.ZK != nil || k.Etcd == nil {
		t.Errorf("etcd-only: want an etcd key ZooKeeper cannot see, got %+v", k)
	}
	var keys struct{ Keys []string }
	j.get(t, "", "keys", nil, &keys)
	if len(keys.Keys) != 1 || keys.Keys[0] != b64("etcd-only") {
		t.Errorf("non-path keys: got %v, want [etcd-only]", keys.Keys)
	}

	var sessions struct {
		Sessions []struct {
			ID     int64    `json:"id,string"`
			Face   string   `json:"face"`
			Client string   `json:"client"`
			Keys   []string `json:"keys"`
		}
	}
	j.get(t, "", "sessions", nil, &sessions)
	if len(sessions.Sessions) != 1 || sessions.Sessions[0].ID != conn.SessionID() || sessions.Sessions[0].Face != "zookeeper" ||
		sessions.Sessions[0].Client == "" || len(sessions.Sessions[0].Keys) != 1 || sessions.Sessions[0].Keys[0] != eph {
		t.Errorf("sessions: got %+v, want the one ZooKeeper session with %s", sessions.Sessions, eph)
	}

	if _, err := j.etcd.Put(ctx, "/app/config/db", `{"host":"db2"}`); err != nil {
		t.Fatal(err)
	}
	var h struct {
		Versions []struct {
			Value   string `json:"value"`
			Version int64  `json:"version"`
		}
	}
	j.get(t, "", "history", url.Values{"path": {"/app/config/db"}}, &h)
	if len(h.Versions) != 2 || h.Versions[0].Value != b64(`{"host":"db2"}`) || h.Versions[1].Value != b64(`{"host":"db1"}`) {
		t.Errorf("history: got %+v, want db2 then db1", h.Versions)
	}
}

// TestAPIChildrenPaging checks the server-side paging of a parent with
// 100,000 children: the count, and a window at the far end, without
// fetching the rest.
func TestAPIChildrenPaging(t *testing.T) {
	j := start(t, 1)
	const total = 100000
	fill(t, j.etcd, "/big", total)
	var page struct {
		Total    int `json:"total"`
		Children []struct{ Name string }
	}
	j.get(t, "", "children", url.Values{"path": {"/big"}, "offset": {fmt.Sprint(total - 3)}, "limit": {"10"}}, &page)
	if page.Total != total || len(page.Children) != 3 || page.Children[2].Name != childName(total-1) {
		t.Fatalf("last page: total %d, %d rows (%+v); want %d rows ending with %s", page.Total, len(page.Children), page.Children, 3, childName(total-1))
	}
	j.get(t, "", "children", url.Values{"path": {"/big"}, "q": {"n0001"}, "limit": {"1000"}}, &page)
	if page.Total != 10 || len(page.Children) != 10 {
		t.Errorf("filter n0001: %d of %d, want the 10 names n00010..n00019", len(page.Children), page.Total)
	}
}

func childName(i int) string { return fmt.Sprintf("n%05d", i) }

// fill creates n children under parent through etcd, 128 to a Txn (etcd's
// default limit of operations per transaction).
func fill(t *testing.T, cli *clientv3.Client, parent string, n int) {
	t.Helper()
	for i := 0; i < n; i += 128 {
		var ops []clientv3.Op
		for k := i; k < min(n, i+128); k++ {
			ops = append(ops, clientv3.OpPut(parent+"/"+childName(k), "v"))
		}
		if _, err := cli.Txn(t.Context()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAPIAuth checks that with etcd auth on the API asks for a token and
// shows a user only what it may read.
func TestAPIAuth(t *testing.T) {
	j := start(t, 1)
	ctx := t.Context()
	for _, k := range []string{"/team/a/x", "/secret/y"} {
		if _, err := j.etcd.Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	// Znodes whose ACL closes them to etcd:alice, and opens one to her:
	// an etcd Range checks the ACL too, and so must the console.
	conn := j.zkConn(t, 0)
	if _, err := conn.Create("/team/a/closed", []byte("c"), 0, zk.DigestACL(zk.PermAll, "bob", "pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/team/a/open", []byte("o"), 0, []zk.ACL{{Perms: zk.PermRead, Scheme: "etcd", ID: "alice"}}); err != nil {
		t.Fatal(err)
	}
	enableAuth(t, j.etcd)

	var answer map[string]any
	if code := j.get(t, "", "children", url.Values{"path": {"/"}}, &answer); code != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want 401", code)
	}
	token := login(t, j, "alice", "alice-pw")
	var kids struct{ Children []struct{ Name string } }
	j.get(t, token, "children", url.Values{"path": {"/"}}, &kids)
	if len(kids.Children) != 1 || kids.Children[0].Name != "team" {
		t.Errorf("alice's root: got %+v, want only team (she may read /team/a/ only)", kids.Children)
	}
	if code := j.get(t, token, "node", url.Values{"path": {"/secret/y"}}, &answer); code != http.StatusForbidden {
		t.Errorf("alice reading /secret/y: status %d, want 403", code)
	}
	for path, want := range map[string]int{"/team/a/x": http.StatusOK, "/team/a/open": http.StatusOK, "/team/a/closed": http.StatusForbidden} {
		var n node
		if code := j.get(t, token, "node", url.Values{"path": {path}}, &n); code != want || (want == http.StatusOK && n.Etcd == nil) {
			t.Errorf("alice reading %s: status %d (%+v), want %d", path, code, n, want)
		}
	}
	var root struct {
		Hidden bool `json:"hidden"`
		ZK     any  `json:"zk"`
	}
	if code := j.get(t, token, "node", url.Values{"path": {"/"}}, &root); code != http.StatusOK || !root.Hidden || root.ZK != nil {
		t.Errorf("alice reading /: status %d, %+v; want it hidden (she may pass through, not read it)", code, root)
	}
}

// enableAuth creates root and alice (read-write on /team/a/ only) and
// turns auth on.
func enableAuth(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "team-a"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "team-a", "/team/a/", clientv3.GetPrefixRangeEnd("/team/a/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "alice", "alice-pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "alice", "team-a"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
}

// login gets a token through etcd's JSON gateway, as the page does.
func login(t *testing.T, j *janus, user, password string) string {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"password":%q}`, user, password)
	resp, err := http.Post(j.base+"/v3/auth/authenticate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("authenticate %s: %v (status %d)", user, err, resp.StatusCode)
	}
	return out.Token
}
