package translate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/januskv/janus/internal/janustest"
)

// TestEtcdUsersMeetZooKeeperACLs is the start of one permission model
// across the faces (README "One permission model"): with etcd auth on, an
// etcd user acts on znodes as the ZooKeeper identity etcd:<user>, so a
// znode's ACL binds etcd clients too; root is ZooKeeper's super. A
// ZooKeeper session's lease is root's alone to list, inspect or revoke,
// and an etcd put over a znode keeps its ACL. The other way, a ZooKeeper
// session acts on keys an etcd role covers only as an etcd user
// (addauth etcd user:password) with the right.
func TestEtcdUsersMeetZooKeeperACLs(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	ctx := t.Context()
	admin := j.EtcdClient(t)
	// The znodes are made before etcd auth is on: after, a ZooKeeper
	// session needs an etcd identity for keys a role covers.
	zc, _ := j.ZKClient(t, 10*time.Second)
	if err := zc.AddAuth("digest", []byte("zkuser:pw")); err != nil {
		t.Fatal(err)
	}
	owner := zk.DigestACL(zk.PermAll, "zkuser", "pw")
	// /locked: only zkuser; /shared: zkuser, and etcd:alice may read.
	if _, err := zc.Create("/locked", []byte("z"), 0, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Create("/locked/child", []byte("c"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	shared := append(zk.DigestACL(zk.PermAll, "zkuser", "pw"), zk.ACL{Perms: zk.PermRead, Scheme: "etcd", ID: "alice"})
	if _, err := zc.Create("/shared", []byte("s"), 0, shared); err != nil {
		t.Fatal(err)
	}

	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "all"); return err },
		func() error {
			// Every key from / to /u, as far as etcd's own permissions
			// go: what stops alice below is the znodes' ACLs alone.
			_, err := admin.RoleGrantPermission(ctx, "all", "/", "/u", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserGrantRole(ctx, "alice", "all"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup: %v", err)
		}
	}
	client := func(user string) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{j.EtcdAddr}, Username: user, Password: user + "pw", DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	root, alice := client("root"), client("alice")

	denied := func(err error) bool { return errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) }
	// A watcher of alice's over every znode: etcd lets her create it; it
	// ends at the first event on a znode her ACL entry cannot read.
	wctx, cancelWatch := context.WithTimeout(ctx, time.Minute)
	defer cancelWatch()
	watch := alice.Watch(wctx, "/", clientv3.WithRange("/u"), clientv3.WithCreatedNotify())
	if r := <-watch; !r.Created || r.Err() != nil {
		t.Fatalf("alice's watch on /: %+v %v", r, r.Err())
	}
	rows := []struct {
		name string
		do   func() error
		ok   bool
	}{
		{"alice reads a znode her ACL entry allows", func() error { _, err := alice.Get(ctx, "/shared"); return err }, true},
		{"alice reads a znode closed to her", func() error { _, err := alice.Get(ctx, "/locked"); return err }, false},
		{"alice reads a range holding it", func() error { _, err := alice.Get(ctx, "/", clientv3.WithRange("/u")); return err }, false},
		{"alice counts a range holding it", func() error {
			_, err := alice.Get(ctx, "/", clientv3.WithRange("/u"), clientv3.WithCountOnly())
			return err
		}, false},
		{"alice counts the znode closed to her", func() error { _, err := alice.Get(ctx, "/locked", clientv3.WithCountOnly()); return err }, false},
		{"alice lists the keys of a range holding it", func() error {
			_, err := alice.Get(ctx, "/", clientv3.WithRange("/u"), clientv3.WithKeysOnly())
			return err
		}, false},
		{"alice counts a range holding it, serializable", func() error {
			_, err := alice.Get(ctx, "/", clientv3.WithRange("/u"), clientv3.WithCountOnly(), clientv3.WithSerializable())
			return err
		}, false},
		{"alice counts it in a txn", func() error {
			_, err := alice.Txn(ctx).Then(clientv3.OpGet("/", clientv3.WithRange("/u"), clientv3.WithCountOnly())).Commit()
			return err
		}, false},
		{"alice counts it in a txn at an old revision", func() error {
			_, err := alice.Txn(ctx).Then(clientv3.OpGet("/", clientv3.WithRange("/u"), clientv3.WithCountOnly(), clientv3.WithRev(2))).Commit()
			return err
		}, false},
		{"alice counts a range of znodes open to her", func() error {
			_, err := alice.Get(ctx, "/shared", clientv3.WithCountOnly())
			return err
		}, true},
		{"alice overwrites a znode closed to her", func() error { _, err := alice.Put(ctx, "/locked", "x"); return err }, false},
		{"alice overwrites a znode she may only read", func() error { _, err := alice.Put(ctx, "/shared", "x"); return err }, false},
		{"alice deletes a child of a znode that denies her delete", func() error { _, err := alice.Delete(ctx, "/locked/child"); return err }, false},
		{"alice creates under a znode that denies her create", func() error { _, err := alice.Put(ctx, "/locked/new", "x"); return err }, false},
		{"alice writes in a txn a znode closed to her", func() error {
			_, err := alice.Txn(ctx).Then(clientv3.OpPut("/locked", "x")).Commit()
			return err
		}, false},
		{"alice writes it in a nested txn", func() error {
			_, err := alice.Txn(ctx).Then(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("/locked", "x")}, nil)).Commit()
			return err
		}, false},
		{"alice writes an open key", func() error { _, err := alice.Put(ctx, "/open", "x"); return err }, true},
	}
	for _, r := range rows {
		err := r.do()
		if r.ok && err != nil || !r.ok && !denied(err) {
			t.Errorf("%s: error %v, want ok=%v (else permission denied)", r.name, err, r.ok)
		}
	}
	// The open put reached alice's watcher; root's put on /locked ends it.
	// Root puts only once /open is in hand: clientv3 drops the responses
	// a watch channel still buffers when the cancel arrives (its
	// serveSubstream returns), so a reader that lags, as this one would
	// under load, could miss /open although the server sent it first.
	var seen []string
	for len(seen) == 0 {
		r, ok := <-watch
		if !ok {
			t.Fatalf("alice's watch ended before the put on /open: %v", r.Err())
		}
		for _, ev := range r.Events {
			seen = append(seen, string(ev.Kv.Key))
		}
	}
	if _, err := root.Put(ctx, "/locked", "r"); err != nil {
		t.Fatalf("root (ZooKeeper's super) overwrites the locked znode: %v", err)
	}
	for r := range watch {
		for _, ev := range r.Events {
			seen = append(seen, string(ev.Kv.Key))
		}
	}
	if wctx.Err() != nil {
		t.Fatal("alice's watch did not end after root's put on /locked")
	}
	if len(seen) != 1 || seen[0] != "/open" {
		t.Fatalf("alice's watcher saw %q, want just /open before it ended", seen)
	}

	// The etcd put kept the ACL: ZooKeeper still sees only zkuser's
	// (zkuser's session needs an etcd identity for /locked now: etcd's
	// role "all" covers it; etcd's root may do anything).
	if _, _, err := zc.GetACL("/locked"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("a ZooKeeper session without an etcd identity reading a key a role covers: %v", err)
	}
	if err := zc.AddAuth("etcd", []byte("root:rootpw")); err != nil {
		t.Fatal(err)
	}
	acl, _, err := zc.GetACL("/locked")
	if err != nil || len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "zkuser:") {
		t.Fatalf("ACL of /locked after an etcd put: %v, %v", acl, err)
	}

	// A ZooKeeper client that authenticates as an etcd user (with its etcd
	// password) meets the ACLs as that user's etcd requests do.
	za, _ := j.ZKClient(t, 10*time.Second)
	if err := za.AddAuth("etcd", []byte("alice:alicepw")); err != nil {
		t.Fatalf("addauth etcd alice: %v", err)
	}
	if _, _, err := za.Get("/shared"); err != nil {
		t.Fatalf("ZooKeeper client as etcd:alice reading /shared: %v", err)
	}
	if _, _, err := za.Get("/locked"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("ZooKeeper client as etcd:alice reading /locked: %v", err)
	}
	if _, err := za.Set("/open", []byte("z"), -1); err != nil {
		t.Fatalf("ZooKeeper client as etcd:alice writing /open, hers by etcd role: %v", err)
	}
	// A session without an etcd identity: keys a role covers are closed
	// to it, keys none covers are left to the ACLs.
	anon, _ := j.ZKClient(t, 10*time.Second)
	if _, _, err := anon.Get("/open"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("anonymous ZooKeeper client reading /open: %v", err)
	}
	if _, err := anon.Create("/free", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("anonymous ZooKeeper client creating /free, which a role covers: %v", err)
	}
	if _, err := anon.Create("/zz", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("anonymous ZooKeeper client creating /zz, which no role covers: %v", err)
	}
	zbad, _ := j.ZKClient(t, 10*time.Second)
	if err := zbad.AddAuth("etcd", []byte("alice:wrong")); err == nil {
		t.Fatal("addauth etcd with a wrong password succeeded")
	}

	// A ZooKeeper session's lease: root sees it; alice neither lists
	// nor ends it.
	session := clientv3.LeaseID(zc.SessionID())
	leases, err := alice.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		if l.ID == session {
			t.Fatalf("alice's lease list shows the ZooKeeper session %x", session)
		}
	}
	if _, err := alice.Revoke(ctx, session); !denied(err) {
		t.Fatalf("alice revoking a ZooKeeper session: %v", err)
	}
	if _, err := alice.TimeToLive(ctx, session); !denied(err) {
		t.Fatalf("alice asking about a ZooKeeper session: %v", err)
	}
	leases, err = root.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range leases.Leases {
		found = found || l.ID == session
	}
	if !found {
		t.Fatalf("root's lease list lacks the ZooKeeper session %x", session)
	}
}
