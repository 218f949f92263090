package translate_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/translate"
)

// The tests in this file drive one Janus with clientv3 and go-zookeeper at
// the same time, one test per rule of the cross-protocol mapping. Waits are
// bounded by generous deadlines; no test asserts how long anything took.

const waitLimit = 30 * time.Second

var openACL = zk.WorldACL(zk.PermAll)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// coreStat converts go-zookeeper's Stat to the core's, so translate's
// functions can be checked against what a ZooKeeper client sees.
func coreStat(s *zk.Stat) core.Stat {
	return core.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
		Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: s.EphemeralOwner,
		DataLength: s.DataLength, NumChildren: s.NumChildren, Pzxid: s.Pzxid,
	}
}

func waitEvent(t *testing.T, ch <-chan zk.Event, what string) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(waitLimit):
		t.Fatalf("no ZooKeeper watch event: %s", what)
		return zk.Event{}
	}
}

func waitState(t *testing.T, events <-chan zk.Event, want zk.State) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case ev := <-events:
			if ev.State == want {
				return
			}
		case <-deadline:
			t.Fatalf("ZooKeeper client never reached state %v", want)
		}
	}
}

func etcdKeys(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := cli.Get(testCtx(t), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

func TestImplicitParentsSeenByZooKeeperOnly(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)

	put, err := cli.Put(ctx, "/a/b/c", "leaf")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range translate.ImplicitParents([]byte("/a/b/c")) {
		data, st, err := conn.Get(string(p))
		if err != nil {
			t.Fatalf("ZooKeeper get of implicit parent %s: %v", p, err)
		}
		if len(data) != 0 || st.Version != 0 || st.NumChildren != 1 || st.EphemeralOwner != 0 {
			t.Errorf("implicit parent %s: data %q stat %+v, want empty, version 0, one child", p, data, st)
		}
		if st.Czxid != put.Header.Revision {
			t.Errorf("implicit parent %s czxid %d, want the revision that made it appear, %d", p, st.Czxid, put.Header.Revision)
		}
	}
	if kids, _, err := conn.Children("/a"); err != nil || !slices.Equal(kids, []string{"b"}) {
		t.Errorf("getChildren(/a) = %q, %v", kids, err)
	}
	if kids, _, err := conn.Children("/"); err != nil || !slices.Contains(kids, "a") {
		t.Errorf("getChildren(/) = %q, %v; want it to list the implicit /a", kids, err)
	}
	if got := etcdKeys(t, cli, "/a"); !slices.Equal(got, []string{"/a/b/c"}) {
		t.Errorf("etcd range of /a: %q; implicit parents must not be returned", got)
	}
	if resp, err := cli.Get(ctx, "/a/b"); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("etcd get of implicit /a/b: %v %v", resp.Kvs, err)
	}

	// A ZooKeeper create under an implicit parent works like under any node.
	if _, err := conn.Create("/a/b/zk", []byte("z"), 0, openACL); err != nil {
		t.Fatalf("create under implicit parent: %v", err)
	}
	_, _, gone, err := conn.ExistsW("/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "/a/b/c"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := conn.Exists("/a/b"); !ok {
		t.Fatal("implicit /a/b vanished while /a/b/zk remains")
	}
	if err := conn.Delete("/a/b/zk", -1); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, gone, "implicit /a vanishing"); ev.Type != zk.EventNodeDeleted {
		t.Errorf("exists watch on implicit /a saw %v, want NodeDeleted", ev)
	}
	for _, p := range []string{"/a/b", "/a"} {
		if ok, _, err := conn.Exists(p); ok || err != nil {
			t.Errorf("implicit parent %s still exists after its last child went (err %v)", p, err)
		}
	}
}

func TestEtcdOnlyKeysInvisibleToZooKeeper(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)

	etcdOnly := []string{"registry/pods/x", "/trailing/", "/double//slash", "/dot/./x", "/ctl\x01/x", "nolead"}
	for _, k := range etcdOnly {
		if translate.IsZNode([]byte(k)) {
			t.Fatalf("test key %q is a znode", k)
		}
		if _, err := cli.Put(ctx, k, "etcd-only"); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}
	if _, err := cli.Put(ctx, "/visible", "both"); err != nil {
		t.Fatal(err)
	}
	kids, _, err := conn.Children("/")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(kids)
	if want := []string{"visible", "zookeeper"}; !slices.Equal(kids, want) {
		t.Errorf("ZooKeeper sees root children %q, want %q: etcd-only keys leaked into the tree", kids, want)
	}
	for _, p := range []string{"/trailing", "/double", "/dot", "/ctl\x01"} {
		if ok, _, err := conn.Exists(p); ok {
			t.Errorf("ZooKeeper sees %q made by an etcd-only key (err %v)", p, err)
		}
	}
	for _, k := range etcdOnly {
		resp, err := cli.Get(ctx, k)
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("etcd lost its own key %q: %v %v", k, resp, err)
		}
	}
	// And the other way: ZooKeeper's system nodes are not etcd keys.
	resp, err := cli.Get(ctx, translate.ReservedPath, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("etcd get %s: %v %v; want no keys (the system nodes are not stored)", translate.ReservedPath, resp, err)
	}
}

// TestBrandNewLooksBrandNewToBoth: a brand-new Janus is a brand-new etcd
// (revision 1, no key, a watch from revision 1 sees nothing) and a
// brand-new ZooKeeper (the system nodes at zxid 0, /zookeeper/config read
// only). Quota nodes a ZooKeeper client makes under /zookeeper/quota are
// stored as any node, and removing them leaves /zookeeper/quota in place.
func TestBrandNewLooksBrandNewToBoth(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	ctx := testCtx(t)
	resp, err := cli.Get(ctx, "", clientv3.WithFromKey())
	if err != nil || len(resp.Kvs) != 0 || resp.Count != 0 || resp.Header.Revision != 1 {
		t.Fatalf("etcd sees %v (err %v); want no key at revision 1", resp, err)
	}
	conn, _ := j.ZKClient(t, 10*time.Second)
	for _, tc := range []struct {
		path string
		kids []string
		acl  []zk.ACL
	}{
		{"/", []string{"zookeeper"}, openACL},
		{"/zookeeper", []string{"config", "quota"}, openACL},
		{"/zookeeper/config", []string{}, zk.WorldACL(zk.PermRead)},
		{"/zookeeper/quota", []string{}, openACL},
	} {
		kids, st, err := conn.Children(tc.path)
		if err != nil || !slices.Equal(kids, tc.kids) || st.NumChildren != int32(len(tc.kids)) || st.Czxid != 0 || st.Mzxid != 0 {
			t.Errorf("ZooKeeper children of %s: %q %+v %v; want %q, created at zxid 0", tc.path, kids, st, err, tc.kids)
		}
		acl, _, err := conn.GetACL(tc.path)
		if err != nil || !slices.Equal(acl, tc.acl) {
			t.Errorf("ACL of %s: %v %v, want %v", tc.path, acl, err, tc.acl)
		}
	}
	if _, err := conn.Set("/zookeeper/config", []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("set /zookeeper/config: %v, want NoAuth", err)
	}
	if resp, err := cli.Get(ctx, "", clientv3.WithFromKey()); err != nil || resp.Header.Revision != 1 {
		t.Fatalf("ZooKeeper reads moved the revision: %v %v", resp, err)
	}
	w := cli.Watch(ctx, "", clientv3.WithFromKey(), clientv3.WithRev(1))

	// setquota's nodes.
	for _, p := range []string{"/zookeeper/quota/app", "/zookeeper/quota/app/zookeeper_limits"} {
		if _, err := conn.Create(p, []byte("n=5"), 0, openACL); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	wr := <-w
	if len(wr.Events) != 1 || string(wr.Events[0].Kv.Key) != "/zookeeper/quota/app" || wr.Events[0].Kv.ModRevision != 2 {
		t.Fatalf("etcd watch from revision 1 got %+v; want the first quota node at revision 2", wr.Events)
	}
	if got := etcdKeys(t, cli, "/zookeeper"); !slices.Equal(got, []string{"/zookeeper/quota/app", "/zookeeper/quota/app/zookeeper_limits"}) {
		t.Errorf("etcd sees %q under /zookeeper; want the quota nodes only", got)
	}
	for _, p := range []string{"/zookeeper/quota/app/zookeeper_limits", "/zookeeper/quota/app"} {
		if err := conn.Delete(p, -1); err != nil {
			t.Fatalf("delete %s: %v", p, err)
		}
	}
	kids, st, err := conn.Children("/zookeeper/quota")
	if err != nil || len(kids) != 0 || st.NumChildren != 0 {
		t.Fatalf("/zookeeper/quota after its last child went: %q %+v %v", kids, st, err)
	}
	if kids, _, err := conn.Children("/zookeeper"); err != nil || !slices.Equal(kids, []string{"config", "quota"}) {
		t.Fatalf("/zookeeper children after the quota nodes went: %q %v", kids, err)
	}
}

func TestSessionIsLeaseAndRevokeExpiresIt(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, events := j.ZKClient(t, 6*time.Second)
	ctx := testCtx(t)

	if _, err := conn.Create("/svc", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	eph, err := conn.Create("/svc/eph", []byte("me"), zk.FlagEphemeral, openACL)
	if err != nil {
		t.Fatal(err)
	}
	id := conn.SessionID()
	lease := clientv3.LeaseID(translate.LeaseOfSession(id))

	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(leases.Leases, func(l clientv3.LeaseStatus) bool { return l.ID == lease }) {
		t.Fatalf("etcd Leases %v does not list session 0x%x", leases.Leases, id)
	}
	ttl, err := cli.TimeToLive(ctx, lease, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != translate.LeaseTTL(6000) || ttl.TTL <= 0 {
		t.Errorf("session's lease TTL %d (remaining %d), want granted %d", ttl.GrantedTTL, ttl.TTL, translate.LeaseTTL(6000))
	}
	if len(ttl.Keys) != 1 || string(ttl.Keys[0]) != eph {
		t.Errorf("lease keys %q, want the ephemeral %q", ttl.Keys, eph)
	}
	got, err := cli.Get(ctx, eph)
	if err != nil || len(got.Kvs) != 1 || got.Kvs[0].Lease != int64(lease) {
		t.Fatalf("etcd get of the ephemeral: %v %v", got, err)
	}

	other, _ := j.ZKClient(t, 10*time.Second)
	_, _, gone, err := other.ExistsW(eph)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatalf("etcd revoke of a session: %v", err)
	}
	if ev := waitEvent(t, gone, "ephemeral deleted by revoke"); ev.Type != zk.EventNodeDeleted {
		t.Errorf("other client saw %v, want NodeDeleted", ev)
	}
	waitState(t, events, zk.StateExpired)
	if got, _ := cli.Get(ctx, eph); len(got.Kvs) != 0 {
		t.Error("ephemeral still visible to etcd after revoke")
	}
	// etcd answers TimeToLive of a revoked lease with TTL -1.
	if r, err := cli.TimeToLive(ctx, lease); err != nil || r.TTL != -1 {
		t.Errorf("TimeToLive of the revoked session's lease: %+v, %v; want TTL -1", r, err)
	}
}

func TestEtcdLeaseKeyIsEphemeralZNode(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)

	grant, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, "/members/m1", "addr", clientv3.WithLease(grant.ID))
	if err != nil {
		t.Fatal(err)
	}
	_, st, ch, err := conn.GetW("/members/m1")
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner != translate.SessionOfLease(int64(grant.ID)) {
		t.Errorf("ephemeralOwner 0x%x, want the lease 0x%x", st.EphemeralOwner, grant.ID)
	}
	if st.Czxid != put.Header.Revision {
		t.Errorf("czxid %d, want put revision %d", st.Czxid, put.Header.Revision)
	}
	// ZooKeeper refuses children under an ephemeral, whoever made it.
	if _, err := conn.Create("/members/m1/child", nil, 0, openACL); !errors.Is(err, zk.ErrNoChildrenForEphemerals) {
		t.Errorf("create under an etcd-leased key: %v, want ErrNoChildrenForEphemerals", err)
	}
	if _, err := cli.Revoke(ctx, grant.ID); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, ch, "leased key revoked"); ev.Type != zk.EventNodeDeleted {
		t.Errorf("data watch saw %v, want NodeDeleted", ev)
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// partitionDialer lets a test cut a go-zookeeper client off its server and
// reconnect it later, so its session expires on the server while the client
// lives on.
type partitionDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (p *partitionDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return nil, errors.New("partitioned by the test")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		p.conns = append(p.conns, c)
	}
	return c, err
}

func (p *partitionDialer) partition(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

func TestSessionExpiryRemovesEphemeralForBoth(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	ctx := testCtx(t)

	var pd partitionDialer
	conn, events, err := zk.Connect([]string{j.ZKAddr}, 4*time.Second, zk.WithDialer(pd.dial), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitState(t, events, zk.StateHasSession)
	eph, err := conn.Create("/eph", []byte("x"), zk.FlagEphemeral, openACL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cli.Get(ctx, eph)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("etcd does not see the ephemeral: %v %v", got, err)
	}
	w := cli.Watch(ctx, eph, clientv3.WithRev(got.Header.Revision+1))
	observer, _ := j.ZKClient(t, 10*time.Second)
	_, _, gone, err := observer.ExistsW(eph)
	if err != nil {
		t.Fatal(err)
	}

	pd.partition(true)
	select {
	case wr := <-w:
		if len(wr.Events) != 1 || wr.Events[0].Type != clientv3.EventTypeDelete {
			t.Fatalf("etcd watch saw %+v, want the ephemeral's delete", wr)
		}
	case <-time.After(waitLimit):
		t.Fatal("etcd watch never saw the expired session's ephemeral go")
	}
	if ev := waitEvent(t, gone, "ephemeral of expired session"); ev.Type != zk.EventNodeDeleted {
		t.Errorf("ZooKeeper observer saw %v, want NodeDeleted", ev)
	}
	pd.partition(false)
	waitState(t, events, zk.StateExpired)
}

func TestSequentialSuffixOrderIsCreateRevisionOrder(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	c1, _ := j.ZKClient(t, 10*time.Second)
	c2, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)
	if _, err := c1.Create("/q", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w, c := range []*zk.Conn{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				if _, err := c.Create(fmt.Sprintf("/q/w%d-", w), []byte("s"), zk.FlagSequence, openACL); err != nil {
					t.Error(err)
					return
				}
				// etcd writes elsewhere in between, so revisions are not
				// dense among the siblings.
				if _, err := cli.Put(ctx, fmt.Sprintf("/other/%d-%d", w, i), "x"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	resp, err := cli.Get(ctx, "/q/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 30 {
		t.Fatalf("%d sequential nodes, want 30", len(resp.Kvs))
	}
	bySuffix := slices.Clone(resp.Kvs)
	sort.Slice(bySuffix, func(a, b int) bool {
		_, x, _ := translate.ParseSequential(string(core.BaseName(bySuffix[a].Key)))
		_, y, _ := translate.ParseSequential(string(core.BaseName(bySuffix[b].Key)))
		return x < y
	})
	byRev := slices.Clone(resp.Kvs)
	sort.Slice(byRev, func(a, b int) bool { return byRev[a].CreateRevision < byRev[b].CreateRevision })
	for i := range byRev {
		if string(bySuffix[i].Key) != string(byRev[i].Key) {
			t.Fatalf("position %d: by suffix %s, by create_revision %s", i, bySuffix[i].Key, byRev[i].Key)
		}
	}
}

func TestZxidsAreRevisions(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)

	if _, err := cli.Put(ctx, "/z", "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set("/z", []byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/z/kid", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/z/kid2", "k"); err != nil {
		t.Fatal(err)
	}
	_, st, err := conn.Get("/z")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/z", clientv3.WithRange("/z0")) // "/z" and "/z/..."
	if err != nil || len(resp.Kvs) != 3 {
		t.Fatalf("etcd get: %v %v", resp, err)
	}
	kv := resp.Kvs[0]
	want := translate.StatOfKeyValue(kv, &core.Dir{NumChildren: st.NumChildren, Cversion: st.Cversion, Pzxid: st.Pzxid})
	got := coreStat(st)
	got.Ctime, got.Mtime = 0, 0 // etcd does not carry times
	if got != want {
		t.Errorf("ZooKeeper Stat %+v, want from etcd's KeyValue %+v", got, want)
	}
	if st.Pzxid != resp.Kvs[2].CreateRevision {
		t.Errorf("pzxid %d, want the create revision of the last child %d", st.Pzxid, resp.Kvs[2].CreateRevision)
	}
	if back, _ := translate.KeyValueOfStat("/z", []byte("two"), got, false); back.String() != kv.String() {
		t.Errorf("KeyValueOfStat gives %v, etcd says %v", back, kv)
	}
}

func TestZooKeeperWatchesFiredByEtcd(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)
	if _, err := cli.Put(ctx, "/w", "v0"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		watch func() (<-chan zk.Event, error)
		write func() error
		want  zk.EventType
		path  string
	}{
		{"data watch, etcd put", func() (<-chan zk.Event, error) { _, _, ch, err := conn.GetW("/w"); return ch, err },
			func() error { _, err := cli.Put(ctx, "/w", "v1"); return err }, zk.EventNodeDataChanged, "/w"},
		{"child watch, etcd put of a child", func() (<-chan zk.Event, error) { _, _, ch, err := conn.ChildrenW("/w"); return ch, err },
			func() error { _, err := cli.Put(ctx, "/w/c", "c"); return err }, zk.EventNodeChildrenChanged, "/w"},
		{"exists watch, etcd put", func() (<-chan zk.Event, error) { _, _, ch, err := conn.ExistsW("/new"); return ch, err },
			func() error { _, err := cli.Put(ctx, "/new", "n"); return err }, zk.EventNodeCreated, "/new"},
		{"exists watch, implicit parent appears", func() (<-chan zk.Event, error) { _, _, ch, err := conn.ExistsW("/imp"); return ch, err },
			func() error { _, err := cli.Put(ctx, "/imp/x/y", "n"); return err }, zk.EventNodeCreated, "/imp"},
		{"child watch, etcd delete of a child", func() (<-chan zk.Event, error) { _, _, ch, err := conn.ChildrenW("/w"); return ch, err },
			func() error { _, err := cli.Delete(ctx, "/w/c"); return err }, zk.EventNodeChildrenChanged, "/w"},
		{"data watch, etcd delete", func() (<-chan zk.Event, error) { _, _, ch, err := conn.GetW("/new"); return ch, err },
			func() error { _, err := cli.Delete(ctx, "/new"); return err }, zk.EventNodeDeleted, "/new"},
		{"exists watch, implicit parent vanishes", func() (<-chan zk.Event, error) { _, _, ch, err := conn.ExistsW("/imp/x"); return ch, err },
			func() error { _, err := cli.Delete(ctx, "/imp/x/y"); return err }, zk.EventNodeDeleted, "/imp/x"},
		{"data watch, etcd delete-range", func() (<-chan zk.Event, error) { _, _, ch, err := conn.GetW("/w"); return ch, err },
			func() error { _, err := cli.Delete(ctx, "/w", clientv3.WithPrefix()); return err }, zk.EventNodeDeleted, "/w"},
	}
	for _, c := range cases {
		ch, err := c.watch()
		if err != nil {
			t.Fatalf("%s: set watch: %v", c.name, err)
		}
		if err := c.write(); err != nil {
			t.Fatalf("%s: etcd write: %v", c.name, err)
		}
		ev := waitEvent(t, ch, c.name)
		if ev.Type != c.want || ev.Path != c.path {
			t.Errorf("%s: got %v on %s, want %v on %s", c.name, ev.Type, ev.Path, c.want, c.path)
		}
	}
}

func TestEtcdWatchSeesZooKeeperWrites(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)
	start, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	w := cli.Watch(ctx, "/zw", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(start.Header.Revision+1))

	if _, err := conn.Create("/zw", []byte("0"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set("/zw", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/zw/gone", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	if err := conn.Delete("/zw/gone", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Multi(
		&zk.CreateRequest{Path: "/zw/m1", Data: []byte("a"), Acl: openACL},
		&zk.CreateRequest{Path: "/zw/m2", Data: []byte("b"), Acl: openACL},
		&zk.SetDataRequest{Path: "/zw", Data: []byte("2"), Version: 1},
	); err != nil {
		t.Fatal(err)
	}

	type ev struct {
		typ     mvccpb.Event_EventType
		key     string
		version int64
	}
	want := []ev{
		{mvccpb.PUT, "/zw", 1}, {mvccpb.PUT, "/zw", 2}, {mvccpb.PUT, "/zw/gone", 1}, {mvccpb.DELETE, "/zw/gone", 0},
		{mvccpb.PUT, "/zw/m1", 1}, {mvccpb.PUT, "/zw/m2", 1}, {mvccpb.PUT, "/zw", 3},
	}
	var got []ev
	revs := map[int64]int{}
	var multiRev int64
	for len(got) < len(want) {
		select {
		case wr := <-w:
			if err := wr.Err(); err != nil {
				t.Fatal(err)
			}
			for _, e := range wr.Events {
				got = append(got, ev{e.Type, string(e.Kv.Key), e.Kv.Version})
				revs[e.Kv.ModRevision]++
				if string(e.Kv.Key) == "/zw/m1" {
					multiRev = e.Kv.ModRevision
				}
			}
		case <-time.After(waitLimit):
			t.Fatalf("etcd watch saw only %v", got)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("etcd watch events\n got %v\nwant %v", got, want)
	}
	if revs[multiRev] != 3 {
		t.Errorf("the multi's three writes span several revisions: %v (multi at %d)", revs, multiRev)
	}
}

func TestMultiAndTxnContendAtomically(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	conn, _ := j.ZKClient(t, 10*time.Second)
	ctx := testCtx(t)
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/c/a", "init"), clientv3.OpPut("/c/b", "init")).Commit(); err != nil {
		t.Fatal(err)
	}
	// Each writer reads /c/a's version, then writes both keys guarded by
	// it: through a ZooKeeper multi (check + two setData) or an etcd Txn
	// (compare version + two puts). A success means no other write came
	// between its read and its write; both keys always carry one writer's
	// value, whichever protocol wrote it.
	const rounds = 40
	var mu sync.Mutex
	wins := 0
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range rounds {
			_, st, err := conn.Get("/c/a")
			if err != nil {
				t.Error(err)
				return
			}
			v := []byte(fmt.Sprintf("zk-%d", i))
			_, err = conn.Multi(
				&zk.CheckVersionRequest{Path: "/c/a", Version: st.Version},
				&zk.SetDataRequest{Path: "/c/a", Data: v, Version: -1},
				&zk.SetDataRequest{Path: "/c/b", Data: v, Version: -1},
			)
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, zk.ErrBadVersion) {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range rounds {
			resp, err := cli.Get(ctx, "/c/a")
			if err != nil {
				t.Error(err)
				return
			}
			v := fmt.Sprintf("etcd-%d", i)
			// The same guard a ZooKeeper check with version
			// ZKVersion(resp.Kvs[0].Version) expresses.
			txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("/c/a"), "=", resp.Kvs[0].Version)).
				Then(clientv3.OpPut("/c/a", v), clientv3.OpPut("/c/b", v)).Commit()
			if err != nil {
				t.Error(err)
				return
			}
			if txn.Succeeded {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}
	}()
	// Meanwhile a reader checks atomicity from both sides.
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := cli.Txn(ctx).Then(clientv3.OpGet("/c/a"), clientv3.OpGet("/c/b")).Commit()
			if err != nil {
				t.Error(err)
				return
			}
			a := resp.Responses[0].GetResponseRange().Kvs[0]
			b := resp.Responses[1].GetResponseRange().Kvs[0]
			if string(a.Value) != string(b.Value) || a.ModRevision != b.ModRevision {
				t.Errorf("torn write seen by etcd: /c/a=%q@%d /c/b=%q@%d", a.Value, a.ModRevision, b.Value, b.ModRevision)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readerDone
	_, sa, err := conn.Get("/c/a")
	if err != nil {
		t.Fatal(err)
	}
	_, sb, _ := conn.Get("/c/b")
	if int(sa.Version) != wins || sb.Version != sa.Version {
		t.Errorf("%d winning writes, but ZooKeeper versions /c/a=%d /c/b=%d", wins, sa.Version, sb.Version)
	}
	if wins == 0 {
		t.Error("no write won")
	}
}

// kazooLockScript takes the lock at argv[2] argv[3] times from two threads
// of one kazoo client, each time doing an unguarded read-modify-write of
// the counter node argv[4] (safe only under the lock), and prints the
// lock node's czxid, the fencing token, each time.
const kazooLockScript = `
import sys, threading
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=30)
lockpath, n, counter = sys.argv[2], int(sys.argv[3]), sys.argv[4]
zk.ensure_path(counter)
tokens = []
def work(ident):
    lock = zk.Lock(lockpath, ident)
    for i in range(n):
        with lock:
            node = lock.node
            tokens.append(zk.exists(lockpath + "/" + node).czxid)
            data, _ = zk.get(counter)
            zk.set(counter, str(int(data or b"0") + 1).encode())
ts = [threading.Thread(target=work, args=("t%d" % k,)) for k in range(2)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(str(x) for x in tokens))
zk.stop()
`

func TestKazooLockAndEtcdMutexConcurrently(t *testing.T) {
	j := janustest.Start(t, janustest.Options{})
	cli := j.EtcdClient(t)
	ctx := testCtx(t)
	const n = 10

	testenv.Python3Kazoo(t) // skip before starting anything if kazoo is missing
	var kazooOut string
	kazooDone := make(chan struct{})
	go func() {
		defer close(kazooDone)
		kazooOut = runKazoo(t, kazooLockScript, j.ZKAddr, "/locks/zk", fmt.Sprint(n), "/counters/zk")
	}()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var etcdTokens []int64
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens, err := etcdMutexRounds(ctx, j.EtcdAddr, "/locks/etcd", "/counters/etcd", n)
			if err != nil {
				t.Errorf("etcd worker %d: %v", w, err)
			}
			mu.Lock()
			etcdTokens = append(etcdTokens, tokens...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	<-kazooDone
	if t.Failed() {
		return
	}

	resp, err := cli.Get(ctx, "/counters/etcd")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(2*n) {
		t.Errorf("etcd-guarded counter %v %v, want %d", resp, err, 2*n)
	}
	resp, err = cli.Get(ctx, "/counters/zk")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(2*n) {
		t.Errorf("kazoo-guarded counter %v %v, want %d", resp, err, 2*n)
	}
	var zkTokens []int64
	for _, f := range strings.Fields(kazooOut) {
		var x int64
		fmt.Sscan(f, &x)
		zkTokens = append(zkTokens, x)
	}
	// Tokens are in acquisition order for kazoo (appended under the lock);
	// each holder's token is larger than every earlier holder's.
	if len(zkTokens) != 2*n || !slices.IsSorted(zkTokens) {
		t.Errorf("kazoo fencing tokens %v: want %d increasing create revisions", zkTokens, 2*n)
	}
	if len(etcdTokens) != 2*n {
		t.Errorf("etcd fencing tokens %v", etcdTokens)
	}
	// Neither lock left anything behind, and each lives on its own path.
	if keys := etcdKeys(t, cli, "/locks/"); !slices.Equal(keys, []string{"/locks/zk"}) {
		t.Errorf("lock keys left behind: %q; want only kazoo's persistent lock directory", keys)
	}
}
