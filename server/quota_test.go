package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/januskv/janus/internal/testenv"
	"github.com/januskv/janus/internal/testlog"
)

func TestQuotaBytes(t *testing.T) {
	for _, c := range []struct{ configured, want int64 }{
		{0, 2 << 30}, {-1, 0}, {1 << 20, 1 << 20}, {16 << 30, 16 << 30},
	} {
		if got := quotaBytes(c.configured); got != c.want {
			t.Errorf("quotaBytes(%d) = %d, want %d", c.configured, got, c.want)
		}
	}
}

// kazooNoSpace creates a node (refused under NOSPACE) and reads /app in the
// same session.
const kazooNoSpace = `
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
zk = KazooClient(hosts=sys.argv[1], timeout=10)
zk.start(timeout=30)
try:
    zk.create("/kazoo", b"x")
    print("create: ok")
except KazooException as e:
    print("create: " + type(e).__name__)
print("read: " + zk.get("/app")[0].decode())
zk.stop()
`

// etcdctlFails runs etcdctl, which must fail, and returns its output.
func etcdctlFails(t *testing.T, endpoint string, args ...string) string {
	t.Helper()
	out, err := exec.Command(testenv.EtcdctlPath(t), append([]string{"--endpoints", endpoint}, args...)...).CombinedOutput()
	if err == nil {
		t.Fatalf("etcdctl %v succeeded:\n%s", args, out)
	}
	return string(out)
}

// TestSpaceQuota fills a member past a small quota and walks etcd's
// recovery through etcdctl and a ZooKeeper client: the write that finds
// the store over the quota raises NOSPACE; while it is active, growing
// writes are refused on both faces (etcd's "database space exceeded",
// ZooKeeper's SystemError) and the member reports it (alarm list, mntr,
// unhealthy status), while reads, deletes, lease revokes and compaction
// work; after compact, defrag and disarm, writes work again.
func TestSpaceQuota(t *testing.T) {
	const quota = 4 << 20
	m, err := OpenMember(MemberConfig{DataDir: t.TempDir(), Logger: testlog.New(t), QuotaBackendBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	faces := startFaces(t, m)
	cli := faces.etcdClient(t)
	ctx := context.Background()
	zc, _, err := zk.Connect([]string{faces.zkAddr}, 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if _, err := zc.Create("/app", []byte("a"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}

	// Values of 256 KiB go to Badger's value log. The size is measured
	// at most once a second, so the quota stops the writes a little past
	// it; the bound only keeps a broken check from filling the disk.
	value := string(bytes.Repeat([]byte("q"), 256<<10))
	puts := 0
	for ; ; puts++ {
		_, err := cli.Put(ctx, fmt.Sprintf("/fill/%04d", puts), value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("put %d: %v", puts, err)
		}
		if puts > 4000 {
			t.Fatalf("%d puts of 256 KiB and no NOSPACE under a %d-byte quota", puts, quota)
		}
	}
	st := m.Status()
	t.Logf("NOSPACE after %d puts of 256 KiB: size %d, quota %d", puts, st.DBSize, st.QuotaBytes)

	ep := faces.etcdAddr
	if out := etcdctlFails(t, ep, "put", "k", "v"); !strings.Contains(out, "etcdserver: mvcc: database space exceeded") {
		t.Fatalf("etcdctl put under NOSPACE:\n%s", out)
	}
	if out := etcdctl(t, ep, "alarm", "list"); !strings.Contains(out, "memberID:1 alarm:NOSPACE") {
		t.Fatalf("alarm list:\n%s", out)
	}
	if st := m.Status(); st.Serving() || !slices.Contains(st.Alarms, "NOSPACE") {
		t.Fatalf("status under NOSPACE: serving %v, alarms %v", st.Serving(), st.Alarms)
	}
	if out := fourLetter(t, faces.zkAddr, "mntr"); !strings.Contains(out, "NOSPACE") {
		t.Fatalf("mntr does not show NOSPACE:\n%s", out)
	}
	if _, err := cli.Grant(ctx, 60); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("lease grant under NOSPACE: %v", err)
	}
	// ZooKeeper: writes that grow are refused, the session goes on.
	if _, err := zc.Create("/more", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Fatalf("zk create under NOSPACE: %v, want error code -1 (SystemError)", err)
	}
	if _, err := zc.Set("/app", []byte("bigger"), -1); err == nil {
		t.Fatal("zk setData under NOSPACE succeeded")
	}
	// kazoo, as a Python application would see it: the error at once,
	// then the same session reads.
	if out := testenv.RunPython(t, kazooNoSpace, faces.zkAddr); out != "create: SystemZookeeperError\nread: a\n" {
		t.Fatalf("kazoo under NOSPACE:\n%s", out)
	}
	if data, _, err := zc.Get("/app"); err != nil || string(data) != "a" {
		t.Fatalf("zk get under NOSPACE: %q, %v", data, err)
	}
	// etcd: reads, deletes, revokes and compaction work.
	if out := etcdctl(t, ep, "get", "/fill/0000", "--keys-only"); !strings.Contains(out, "/fill/0000") {
		t.Fatalf("etcdctl get under NOSPACE:\n%s", out)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatalf("revoke under NOSPACE: %v", err)
	}
	etcdctl(t, ep, "del", "--prefix", "/fill/")
	// Compacting to a revision keeps the one below it (where the previous
	// values of its events are read), so a revision after the delete is
	// what lets compaction drop the deleted values.
	if err := zc.Delete("/app", -1); err != nil {
		t.Fatalf("zk delete under NOSPACE: %v", err)
	}
	rev, err := m.Rev()
	if err != nil {
		t.Fatal(err)
	}
	etcdctl(t, ep, "compact", fmt.Sprint(rev))
	// Still refused: only disarming ends the alarm.
	if _, err := cli.Put(ctx, "k", "v"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("put after compact, before disarm: %v", err)
	}
	etcdctl(t, ep, "defrag")
	if size := m.Status().DBSize; size >= quota {
		t.Fatalf("size after delete, compact and defrag is %d, still over the %d-byte quota", size, quota)
	}
	etcdctl(t, ep, "alarm", "disarm")
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put after disarm: %v", err)
	}
	if _, err := zc.Create("/after", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("zk create after disarm: %v", err)
	}
	if st := m.Status(); !st.Serving() || len(st.Alarms) != 0 {
		t.Fatalf("after disarm: serving %v, alarms %v", st.Serving(), st.Alarms)
	}
	if a := m.Alarms(); len(a) != 0 {
		t.Fatalf("alarms after disarm: %v", a)
	}
}
