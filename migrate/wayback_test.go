package migrate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/migrate"
)

// readACLs returns path -> ACL of every persistent node under root.
func readACLs(t *testing.T, c *zk.Conn, tree map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p := range tree {
		acl, _, err := c.GetACL(p)
		if err != nil {
			t.Fatalf("ACL of %s: %v", p, err)
		}
		out[p] = fmt.Sprint(acl)
	}
	return out
}

// followUntil runs a follow, calls during once it is following, then cuts
// over and returns the report; the cut-over must verify equal.
func followUntil(t *testing.T, cfg migrate.Config, during func()) *migrate.Report {
	t.Helper()
	var out syncBuffer
	cfg.Out, cfg.Follow = &out, true
	runCtx, cutover := context.WithCancel(testCtx(t))
	defer cutover()
	done := runAsync(runCtx, cfg)
	waitFor(t, &out, "following")
	during()
	cutover()
	res := <-done
	t.Logf("output:\n%s", out.String())
	if res.err != nil {
		t.Fatalf("follow and cut-over: %v", res.err)
	}
	return res.rep
}

// TestWayBackToZooKeeper moves a tree out of Janus into a real ZooKeeper
// 3.8, following Janus's ZooKeeper face while it is written, ACLs
// included, then back into a fresh Janus: the round trip ends equal to the
// original, data and ACLs.
func TestWayBackToZooKeeper(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	jc, _ := j.ZKClient(t, 10*time.Second)
	populateZK(t, jc)
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})

	rep := followUntil(t, migrate.Config{From: endpoint(t, "zk://"+j.ZKAddr), To: endpoint(t, "zk://"+ref.Addr), Auth: adminAuth}, func() {
		if _, err := jc.Set("/app/empty", []byte("set while followed"), -1); err != nil {
			t.Fatal(err)
		}
		if _, err := jc.Create("/app/later", []byte("created while followed"), 0, zk.WorldACL(zk.PermRead|zk.PermWrite)); err != nil {
			t.Fatal(err)
		}
		if _, err := jc.Multi(
			&zk.CreateRequest{Path: "/app/m1", Data: []byte("multi"), Acl: openACL},
			&zk.DeleteRequest{Path: "/deep/a/b/c/d", Version: -1},
		); err != nil {
			t.Fatal(err)
		}
	})
	if rep.Followed < 4 {
		t.Errorf("followed %d events, want at least 4", rep.Followed)
	}
	zc, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	if err := zc.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	orig := readTree(t, jc, "/")
	sameTree(t, orig, readTree(t, zc, "/"))
	if got := readACLs(t, zc, orig); got["/app/config"] != readACLs(t, jc, orig)["/app/config"] {
		t.Errorf("ZooKeeper's ACL of /app/config %s, Janus's %s", got["/app/config"], readACLs(t, jc, orig)["/app/config"])
	}

	// And back into a fresh Janus.
	j2 := janustest.Start(t, janustest.Options{})
	if _, err := migrate.Run(testCtx(t), migrate.Config{From: endpoint(t, "zk://"+ref.Addr), To: endpoint(t, "zk://"+j2.ZKAddr), Auth: adminAuth}); err != nil {
		t.Fatal(err)
	}
	j2c, _ := j2.ZKClient(t, 10*time.Second)
	if err := j2c.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	back := readTree(t, j2c, "/")
	sameTree(t, orig, back)
	origACL, backACL := readACLs(t, jc, orig), readACLs(t, j2c, orig)
	for p, a := range origACL {
		if backACL[p] != a {
			t.Errorf("round trip changed the ACL of %s: %s, now %s", p, a, backACL[p])
		}
	}
}

func etcdKeys(t *testing.T, cli *clientv3.Client) map[string]string {
	t.Helper()
	resp, err := cli.Get(testCtx(t), "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		if kv.Lease == 0 && !strings.HasPrefix(string(kv.Key), "/zookeeper") {
			out[string(kv.Key)] = string(kv.Value)
		}
	}
	return out
}

// TestWayBackToEtcd moves a keyspace out of Janus into a real etcd v3.7.3,
// following Janus's etcd face while it is written, then back into a fresh
// Janus: the round trip ends equal to the original.
func TestWayBackToEtcd(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	jcli := j.EtcdClient(t)
	ctx := testCtx(t)
	for i := range 300 {
		if _, err := jcli.Put(ctx, fmt.Sprintf("/registry/pods/default/p%03d", i), fmt.Sprintf(`{"pod":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]string{"plain": "not a path", "/bin": "\x00\xff", "/a//b": "etcd only"} {
		if _, err := jcli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	ref := testenv.StartEtcd(t)
	refAddr := strings.TrimPrefix(ref.Endpoints[0], "http://")
	rep := followUntil(t, migrate.Config{From: endpoint(t, "etcd://"+j.EtcdAddr), To: endpoint(t, "etcd://"+refAddr)}, func() {
		if _, err := jcli.Put(ctx, "/registry/pods/default/p001", "changed"); err != nil {
			t.Fatal(err)
		}
		if _, err := jcli.Delete(ctx, "/registry/pods/default/p002"); err != nil {
			t.Fatal(err)
		}
		if _, err := jcli.Txn(ctx).Then(clientv3.OpPut("/new/a", "1"), clientv3.OpDelete("plain")).Commit(); err != nil {
			t.Fatal(err)
		}
	})
	if rep.Followed != 4 {
		t.Errorf("followed %d events, want 4", rep.Followed)
	}
	orig := etcdKeys(t, jcli)
	if got := etcdKeys(t, janustest.EtcdClient(t, refAddr)); fmt.Sprint(got) != fmt.Sprint(orig) {
		t.Errorf("etcd holds %d keys, Janus %d; differ", len(got), len(orig))
	}

	j2 := janustest.Start(t, janustest.Options{})
	if _, err := migrate.Run(ctx, migrate.Config{From: endpoint(t, "etcd://"+refAddr), To: endpoint(t, "etcd://"+j2.EtcdAddr)}); err != nil {
		t.Fatal(err)
	}
	if back := etcdKeys(t, j2.EtcdClient(t)); fmt.Sprint(back) != fmt.Sprint(orig) {
		t.Errorf("round trip: %d keys, original %d; differ", len(back), len(orig))
	}
}

// TestEtcdCutoverWithQuietPrefix cuts over a follow of one prefix while
// only keys outside it change: the source's revision moves on with no event
// for the follower, and the cut-over must still learn (by a progress
// request) that it has everything.
func TestEtcdCutoverWithQuietPrefix(t *testing.T) {
	ref := testenv.StartEtcd(t)
	addr := strings.TrimPrefix(ref.Endpoints[0], "http://")
	src := janustest.EtcdClient(t, addr)
	ctx := testCtx(t)
	if _, err := src.Put(ctx, "/p/a", "1"); err != nil {
		t.Fatal(err)
	}
	j := janustest.Start(t, janustest.Options{})
	rep := followUntil(t, migrate.Config{From: endpoint(t, "etcd://"+addr+"/p/"), To: endpoint(t, "etcd://"+j.EtcdAddr)}, func() {
		for i := range 5 {
			if _, err := src.Put(ctx, fmt.Sprintf("/other/%d", i), "x"); err != nil {
				t.Fatal(err)
			}
		}
	})
	if rep.Copied != 1 || rep.Followed != 0 {
		t.Errorf("copied %d, followed %d; want 1 and 0", rep.Copied, rep.Followed)
	}
}
