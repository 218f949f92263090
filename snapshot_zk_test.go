package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
)

// znode is what a ZooKeeper client reads of one node.
type znode struct {
	Data []byte
	Stat zk.Stat
	ACL  string
}

// zkTree reads every node under / except /zookeeper, depth first.
func zkTree(t *testing.T, c *zk.Conn) map[string]znode {
	t.Helper()
	tree := map[string]znode{}
	var walk func(p string)
	walk = func(p string) {
		data, stat, err := c.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		acl, _, err := c.GetACL(p)
		if err != nil {
			t.Fatalf("getACL %s: %v", p, err)
		}
		tree[p] = znode{data, *stat, fmt.Sprint(acl)}
		children, _, err := c.Children(p)
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		slices.Sort(children)
		for _, name := range children {
			child := strings.TrimSuffix(p, "/") + "/" + name
			if child != "/zookeeper" {
				walk(child)
			}
		}
	}
	walk("/")
	return tree
}

// TestSnapshotRestoreFromZooKeeperDataDir writes a tree to a real
// ZooKeeper 3.8 (ACLs, nested nodes, sequentials, deletes, setData,
// setACL, multis, an ephemeral, a container and a TTL node), kills it, and
// restores its data directory (an initial snapshot and a transaction log
// holding everything) into Janus. A ZooKeeper client then reads the same
// tree from Janus: data, every Stat field, ACLs.
func TestSnapshotRestoreFromZooKeeperDataDir(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	// The longest session ZooKeeper grants (20 ticks): the ephemeral must
	// outlive the comparison on Janus, where its session restarts.
	c, _ := janustest.ZKClient(t, ref.Addr, 40*time.Second)
	if err := c.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	open := zk.WorldACL(zk.PermAll)
	guarded := append(zk.DigestACL(zk.PermAll, "admin", "secret"), zk.WorldACL(zk.PermRead)...)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create("/app", []byte("root of app"), 0, guarded))
	must(c.Create("/app/cfg", []byte("v1"), 0, open))
	must(c.Set("/app/cfg", []byte("v2"), 0))
	must(c.Set("/app/cfg", []byte("v3"), 1))
	must(c.Create("/app/a", nil, 0, open))
	must(c.Create("/app/a/b", []byte{0, 1, 2, 255}, 0, open))
	must(c.Create("/app/a/b/c", []byte(strings.Repeat("x", 100<<10)), 0, open))
	must(c.Create("/app/q", nil, 0, open))
	for range 5 {
		must(c.Create("/app/q/seq-", []byte("s"), zk.FlagSequence, open))
	}
	must(nil, c.Delete("/app/q/seq-0000000001", -1))
	must(nil, c.Delete("/app/q/seq-0000000003", -1))
	must(c.Create("/gone", nil, 0, open))
	must(c.Create("/gone/child", nil, 0, open))
	must(nil, c.Delete("/gone/child", -1))
	must(nil, c.Delete("/gone", -1))
	must(c.Create("/acl", nil, 0, open))
	must(c.SetACL("/acl", guarded, 0))
	must(c.Multi(
		&zk.CreateRequest{Path: "/multi", Data: []byte("m"), Acl: open},
		&zk.CreateRequest{Path: "/multi/one", Acl: open},
		&zk.SetDataRequest{Path: "/app/cfg", Data: []byte("v4"), Version: -1},
	))
	// A failed multi changes nothing.
	if _, err := c.Multi(
		&zk.CreateRequest{Path: "/multi/two", Acl: open},
		&zk.DeleteRequest{Path: "/does-not-exist", Version: -1},
	); err == nil {
		t.Fatal("a multi deleting a missing node succeeded")
	}
	must(c.Create("/app/eph", []byte("mine"), zk.FlagEphemeral, open))
	must(c.CreateContainer("/box", nil, zk.FlagContainer, open))
	must(c.Create("/box/item", nil, 0, open))
	must(c.CreateTTL("/ttl", []byte("t"), zk.FlagTTL, open, time.Hour))
	// A session that ended took its ephemeral with it.
	other, _ := janustest.ZKClient(t, ref.Addr, 10*time.Second)
	must(other.Create("/short-lived", nil, zk.FlagEphemeral, open))
	other.Close()

	want := zkTree(t, c)
	if _, ok := want["/short-lived"]; ok {
		t.Fatal("the closed session's ephemeral is still there")
	}
	ref.Stop()

	dir := filepath.Join(t.TempDir(), "restored")
	if out := restoreSnapshot(t, "--from-zk-datadir", ref.DataDir, "--data-dir", dir); !strings.Contains(out, "restored a zookeeper backup") {
		t.Errorf("restore said %q", out)
	}
	j := startInProcess(t, dir)
	jc, _ := janustest.ZKClient(t, j.ZK, 10*time.Second)
	if err := jc.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	got := zkTree(t, jc)
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: missing after the restore", p)
		case !bytes.Equal(g.Data, w.Data):
			t.Errorf("%s: data %.40q, want %.40q", p, g.Data, w.Data)
		case g.Stat != w.Stat:
			t.Errorf("%s: stat\n got %+v\nwant %+v", p, g.Stat, w.Stat)
		case g.ACL != w.ACL:
			t.Errorf("%s: ACL %s, want %s", p, g.ACL, w.ACL)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: restored but ZooKeeper did not have it", p)
		}
	}
	// The sequence counter came along: the next name is ZooKeeper's next.
	name, err := jc.Create("/app/q/seq-", nil, zk.FlagSequence, open)
	if wantName := fmt.Sprintf("/app/q/seq-%010d", want["/app/q"].Stat.Cversion); err != nil || name != wantName {
		t.Errorf("next sequential node %q (%v), want %q", name, err, wantName)
	}
}

// TestZooKeeperSessionResumesAfterARestore: a client of a ZooKeeper that
// is stopped and restored into Janus at the same address reconnects with
// its session ID and password and carries on in the same session, its
// ephemerals still its own: ZooKeeper derives passwords from session IDs,
// and the restore derives them the same way.
func TestZooKeeperSessionResumesAfterARestore(t *testing.T) {
	ref := testenv.StartZooKeeper(t, testenv.ZKOptions{})
	c, events := janustest.ZKClient(t, ref.Addr, 40*time.Second)
	open := zk.WorldACL(zk.PermAll)
	if _, err := c.Create("/eph", []byte("mine"), zk.FlagEphemeral, open); err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	ref.Stop()

	dir := filepath.Join(t.TempDir(), "restored")
	restoreSnapshot(t, "--from-zk-datadir", ref.DataDir, "--data-dir", dir)
	j := startInProcess(t, dir, "--zk-listen", ref.Addr)

	// The client keeps dialling the address it knows.
	deadline := time.After(time.Minute)
	for resumed := false; !resumed; {
		select {
		case ev := <-events:
			switch ev.State {
			case zk.StateExpired:
				t.Fatal("Janus told the moved client its session expired")
			case zk.StateHasSession:
				resumed = true
			}
		case <-deadline:
			t.Fatal("the client did not reconnect to Janus")
		}
	}
	if c.SessionID() != sid {
		t.Fatalf("session %#x after the move, want %#x", c.SessionID(), sid)
	}
	_, stat, err := c.Get("/eph")
	if err != nil || stat.EphemeralOwner != sid {
		t.Fatalf("/eph after the move: %+v, %v; want it owned by %#x", stat, err, sid)
	}
	if _, err := c.Create("/eph2", nil, zk.FlagEphemeral, open); err != nil {
		t.Fatalf("the resumed session cannot create: %v", err)
	}
	// Closing the resumed session ends its ephemerals, old and new.
	c.Close()
	other, _ := janustest.ZKClient(t, j.ZK, 10*time.Second)
	for _, p := range []string{"/eph", "/eph2"} {
		if ok, _, err := other.Exists(p); err != nil || ok {
			t.Errorf("%s after the session closed: exists %v (%v)", p, ok, err)
		}
	}
}
