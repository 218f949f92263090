package migrate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/migrate"
)

var openACL = zk.WorldACL(zk.PermAll)

// adminAuth is the identity populateZK's restricted ACL names.
var adminAuth = []migrate.Auth{{Scheme: "digest", Credentials: []byte("admin:secret")}}

// syncBuffer is an io.Writer a migration writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func endpoint(t *testing.T, s string) migrate.Endpoint {
	t.Helper()
	e, err := migrate.ParseEndpoint(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// populateZK writes a tree with every kind of node a migration meets.
func populateZK(t *testing.T, c *zk.Conn) {
	t.Helper()
	restricted := append(zk.DigestACL(zk.PermAll, "admin", "secret"), zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"})
	// The source's owner holds the digest identity the restricted ACL names;
	// a migration that copies ACLs needs it too (adminAuth), because
	// ZooKeeper hides the digest from sessions without ADMIN on the node.
	if err := c.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789"), 50_000)
	steps := []struct {
		path  string
		data  []byte
		flags int32
		acl   []zk.ACL
	}{
		{"/app", []byte("root of app"), 0, openACL},
		{"/app/config", []byte(`{"replicas":3}`), 0, restricted},
		{"/app/config/child", []byte("under a restricted parent"), 0, openACL},
		{"/app/empty", nil, 0, openACL},
		{"/app/binary", []byte{0, 1, 2, 0xff, 0xfe}, 0, openACL},
		{"/app/big", big, 0, openACL},
		{"/app/jobs", nil, 0, openACL},
		{"/app/jobs/job-", []byte("1"), zk.FlagSequence, openACL},
		{"/app/jobs/job-", []byte("2"), zk.FlagSequence, openACL},
		{"/app/live", []byte("me"), zk.FlagEphemeral, openACL},
		{"/deep/a/b/c/d", []byte("deep"), 0, openACL},
	}
	for _, s := range steps {
		if strings.HasPrefix(s.path, "/deep/") {
			for _, p := range []string{"/deep", "/deep/a", "/deep/a/b", "/deep/a/b/c"} {
				if _, err := c.Create(p, nil, 0, openACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					t.Fatal(err)
				}
			}
		}
		if _, err := c.Create(s.path, s.data, s.flags, s.acl); err != nil {
			t.Fatalf("source: create %s: %v", s.path, err)
		}
	}
	if _, err := c.CreateContainer("/app/box", []byte("container"), zk.FlagContainer, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/app/box/item", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTTL("/app/lease", []byte("ttl"), zk.FlagTTL, openACL, time.Hour); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateFromZooKeeperToZooKeeperFace(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	src, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	populateZK(t, src)
	j := janustest.Start(t, janustest.Options{})
	ctx := testCtx(t)

	// Without the identity, the source shows the restricted node's digest
	// as "x": copying that would lock everyone out, so the copy refuses.
	var out syncBuffer
	cfg := migrate.Config{From: endpoint(t, "zk://"+ref.Addr), To: endpoint(t, "zk://"+j.ZKAddr), Out: &out, ProgressEvery: 5}
	if _, err := migrate.Run(ctx, cfg); !errors.Is(err, migrate.ErrACLHidden) || !strings.Contains(err.Error(), "/app/config") {
		t.Fatalf("copy without ADMIN on a digest ACL: %v, want ErrACLHidden naming /app/config", err)
	}
	out = syncBuffer{}
	cfg.Auth = adminAuth
	rep, err := migrate.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	// 11 nodes of populateZK minus the ephemeral, the 4 /deep parents, the
	// container, its item and the TTL node.
	if rep.Copied != 17 || len(rep.Differences) != 0 {
		t.Errorf("copied %d (want 17), differences %q", rep.Copied, rep.Differences)
	}
	if !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.Contains(s, "/app/live") }) {
		t.Errorf("ephemeral not reported as skipped: %q", rep.Skipped)
	}
	for _, want := range []string{"skipped ephemeral /app/live", "copied 5", "verification: 17 nodes, no differences"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// The copy through the ZooKeeper face kept ACLs and modes.
	dst, _ := j.ZKClient(t, 10*time.Second)
	if err := dst.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	acl, _, err := dst.GetACL("/app/config")
	srcACL, _, _ := src.GetACL("/app/config")
	if err != nil || fmt.Sprint(acl) != fmt.Sprint(srcACL) || strings.Contains(fmt.Sprint(acl), ":x") {
		t.Errorf("target ACL of /app/config: %v %v, source %v", acl, err, srcACL)
	}
	if ok, _, _ := dst.Exists("/app/live"); ok {
		t.Error("ephemeral copied")
	}
	if ok, _, _ := dst.Exists("/zookeeper/quota"); !ok {
		t.Error("target lost its own /zookeeper/quota")
	}
	cli := j.EtcdClient(t)
	got, err := cli.Get(ctx, "/app/big")
	if err != nil || len(got.Kvs) != 1 || len(got.Kvs[0].Value) != 500_000 {
		t.Errorf("etcd view of the copied big node: %v", err)
	}
	// A deliberately altered target: every kind of difference is printed.
	if _, err := dst.Set("/app/binary", []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	if err := dst.Delete("/deep/a/b/c/d", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Create("/app/extra", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.SetACL("/app/empty", zk.WorldACL(zk.PermRead), -1); err != nil {
		t.Fatal(err)
	}
	out = syncBuffer{}
	rep, err = migrate.Verify(ctx, cfg)
	if !errors.Is(err, migrate.ErrDifferences) {
		t.Fatalf("verify of an altered target: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`data of /app/binary: source "\x00\x01\x02\xff\xfe", target "changed"`,
		"only in source: /deep/a/b/c/d",
		"only in target: /app/extra",
		"ACL of /app/empty: source world:anyone:31, target world:anyone:1",
	} {
		if !slices.Contains(rep.Differences, want) {
			t.Errorf("differences %q lack %q", rep.Differences, want)
		}
		if !strings.Contains(out.String(), "DIFF "+want) {
			t.Errorf("output lacks DIFF %s", want)
		}
	}
	if len(rep.Differences) != 4 {
		t.Errorf("%d differences, want 4: %q", len(rep.Differences), rep.Differences)
	}
}

func TestMigrateZooKeeperSubtreeToEtcdFace(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	src, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	populateZK(t, src)
	j := janustest.Start(t, janustest.Options{})
	ctx := testCtx(t)

	var out syncBuffer
	cfg := migrate.Config{From: endpoint(t, "zk://"+ref.Addr+"/app"), To: endpoint(t, "etcd://"+j.EtcdAddr), Out: &out, BatchSize: 3}
	rep, err := migrate.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if rep.Copied != 12 || rep.ACLsDropped != 1 {
		t.Errorf("copied %d (want 12), ACLs dropped %d (want 1)", rep.Copied, rep.ACLsDropped)
	}
	if !strings.Contains(out.String(), "--to zk://") {
		t.Errorf("no warning about dropped ACLs:\n%s", out.String())
	}
	cli := j.EtcdClient(t)
	resp, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		if !strings.HasPrefix(string(kv.Key), "/zookeeper") {
			keys = append(keys, string(kv.Key))
		}
	}
	if len(keys) != 12 || slices.Contains(keys, "/deep/a/b/c/d") || slices.Contains(keys, "/app/live") {
		t.Errorf("target keys %q: want the 12 persistent nodes of /app only", keys)
	}

	// Altered through etcd: the change and an extra key below the subtree
	// are reported; a key beside it (/apple) is outside the subtree.
	if _, err := cli.Put(ctx, "/app/config", "tampered"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"/app/zz-extra", "/apple"} {
		if _, err := cli.Put(ctx, k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = migrate.Verify(ctx, cfg)
	if !errors.Is(err, migrate.ErrDifferences) {
		t.Fatalf("verify: %v", err)
	}
	want := []string{`data of /app/config: source "{\"replicas\":3}", target "tampered"`, "only in target: /app/zz-extra"}
	if !slices.Equal(rep.Differences, want) {
		t.Errorf("differences %q, want %q", rep.Differences, want)
	}
}

func TestMigrateFromEtcdWithFollow(t *testing.T) {
	ref := testenv.StartEtcd(t)
	src := janustest.EtcdClient(t, strings.TrimPrefix(ref.Endpoints[0], "http://"))
	j := janustest.Start(t, janustest.Options{})
	dst := j.EtcdClient(t)
	ctx := testCtx(t)

	// Enough keys for several Range pages and batches, plus every kind of
	// key an etcd keyspace holds.
	const n = 2300
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for k := i; k < i+100 && k < n; k++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/registry/pods/p%05d", k), fmt.Sprintf("pod %d", k)))
		}
		if _, err := src.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]string{"plain-key": "not a path", "/a//b": "etcd only", "/bin": "\x00\xff", "/zookeeper/mine": "reserved"} {
		if _, err := src.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := src.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Put(ctx, "/election/leader", "me", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}

	var out syncBuffer
	cfg := migrate.Config{From: endpoint(t, "etcd://"+strings.TrimPrefix(ref.Endpoints[0], "http://")), To: endpoint(t, "etcd://"+j.EtcdAddr),
		Out: &out, Follow: true, ProgressEvery: 1000}
	runCtx, stop := context.WithCancel(ctx)
	type result struct {
		rep *migrate.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := migrate.Run(runCtx, cfg)
		done <- result{rep, err}
	}()
	waitFor(t, &out, "following")

	// Changes during following: a put, a delete, a Txn, a key gaining a
	// lease, and several writes of one key in one Txn's neighbourhood.
	if _, err := src.Put(ctx, "/registry/pods/p00001", "changed"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Delete(ctx, "/registry/pods/p00002"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Txn(ctx).Then(clientv3.OpPut("/new/a", "1"), clientv3.OpPut("/new/b", "2"), clientv3.OpDelete("plain-key")).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Put(ctx, "/bin", "leased now", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := src.Put(ctx, "/counter", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Cut over once the target has caught up with the last write.
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := dst.Get(ctx, "/counter")
		if err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "4" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follow never applied the last write:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	res := <-done
	t.Logf("output:\n%s", out.String())
	if res.err != nil {
		t.Fatalf("migrate: %v", res.err)
	}
	if res.rep.Copied != n+3 || res.rep.Followed != 11 {
		t.Errorf("copied %d (want %d), followed %d events (want 11)", res.rep.Copied, n+3, res.rep.Followed)
	}
	if progress := len(regexp.MustCompile(`(?m)^copied \d+$`).FindAllString(out.String(), -1)); progress < 2 {
		t.Errorf("%d progress lines, want one per 1000 keys", progress)
	}
	for _, want := range []string{`skipped leased key "/election/leader"`, `skipped "/zookeeper/mine"`, "no differences"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for k, want := range map[string]string{"/registry/pods/p00001": "changed", "/registry/pods/p00002": "", "plain-key": "", "/bin": "", "/new/b": "2", "/a//b": "etcd only"} {
		r, err := dst.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(r.Kvs) == 1 {
			got = string(r.Kvs[0].Value)
		}
		if got != want {
			t.Errorf("target %q = %q, want %q", k, got, want)
		}
	}

	// Altered target: reported, non-zero.
	if _, err := dst.Put(ctx, "/registry/pods/p00003", "tampered"); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Delete(ctx, "/new/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Put(ctx, "stray", "x"); err != nil {
		t.Fatal(err)
	}
	cfg.Follow, cfg.Out = false, &syncBuffer{}
	rep, err := migrate.Verify(ctx, cfg)
	if !errors.Is(err, migrate.ErrDifferences) {
		t.Fatalf("verify of an altered target: %v", err)
	}
	want := []string{`only in source: "/new/a"`, `value of "/registry/pods/p00003": source "pod 3", target "tampered"`, `only in target: "stray"`}
	if !slices.Equal(rep.Differences, want) {
		t.Errorf("differences %q, want %q", rep.Differences, want)
	}
}

func waitFor(t *testing.T, out *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output never said %q:\n%s", s, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDryRun lists what a copy would skip or change and writes nothing.
func TestDryRun(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	src, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	populateZK(t, src)
	j := janustest.Start(t, janustest.Options{})
	ctx := testCtx(t)
	cli := j.EtcdClient(t)

	cases := []struct {
		to   string
		want []string
	}{
		{"etcd://" + j.EtcdAddr, []string{
			"would skip ephemeral /app/live",
			"would drop the ACL of /app/config",
			"dry run: would copy 17 nodes",
			"container and TTL nodes, if any, would be written as persistent nodes",
		}},
		{"zk://" + j.ZKAddr, []string{
			"cannot copy the ACL of /app/config",
			"1 ACLs hidden from this session",
		}},
	}
	for _, c := range cases {
		var out syncBuffer
		_, err := migrate.Run(ctx, migrate.Config{From: endpoint(t, "zk://"+ref.Addr), To: endpoint(t, c.to), Out: &out, DryRun: true})
		if err != nil {
			t.Fatalf("dry run to %s: %v\n%s", c.to, err, out.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("dry run to %s: output lacks %q:\n%s", c.to, w, out.String())
			}
		}
	}
	if resp, err := cli.Get(ctx, "/app", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("a dry run wrote to the target: %v keys, %v", resp.Count, err)
	}

	eref := testenv.StartEtcd(t)
	esrc := janustest.EtcdClient(t, strings.TrimPrefix(eref.Endpoints[0], "http://"))
	lease, err := esrc.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []clientv3.Op{clientv3.OpPut("plain-key", "x"), clientv3.OpPut("/ok", "y"), clientv3.OpPut("/leader", "me", clientv3.WithLease(lease.ID))} {
		if _, err := esrc.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	var out syncBuffer
	if _, err := migrate.Run(ctx, migrate.Config{From: endpoint(t, "etcd://"+strings.TrimPrefix(eref.Endpoints[0], "http://")), To: endpoint(t, "etcd://"+j.EtcdAddr), Out: &out, DryRun: true}); err != nil {
		t.Fatalf("etcd dry run: %v\n%s", err, out.String())
	}
	for _, w := range []string{`would skip leased key "/leader"`, `would copy "plain-key", which the target's ZooKeeper face cannot show`, "would copy 2 keys"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("etcd dry run: output lacks %q:\n%s", w, out.String())
		}
	}
}
