package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/janustest"
	"github.com/januskv/janus/internal/testenv"
)

// kvRow is everything etcd says about one key.
type kvRow struct {
	Key, Value                            string
	CreateRev, ModRev, Version, LeaseHint int64
}

// leaseRow is a lease as TimeToLive reports it; the remaining TTL is left
// out (it depends on when it is asked).
type leaseRow struct {
	Granted int64
	Keys    []string
}

// etcdState reads every key (with revisions and versions), the current
// revision and every lease (with its granted TTL and keys) through c.
func etcdState(t *testing.T, c *clientv3.Client) (rev int64, kvs []kvRow, leases map[int64]leaseRow) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		kvs = append(kvs, kvRow{string(kv.Key), string(kv.Value), kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease})
	}
	ls, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leases = map[int64]leaseRow{}
	for _, l := range ls.Leases {
		ttl, err := c.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		row := leaseRow{Granted: ttl.GrantedTTL}
		for _, k := range ttl.Keys {
			row.Keys = append(row.Keys, string(k))
		}
		slices.Sort(row.Keys)
		leases[int64(l.ID)] = row
	}
	return resp.Header.Revision, kvs, leases
}

// sameEtcdState fails the test unless a and b hold the same keys, values,
// revisions, versions and leases at the same revision.
func sameEtcdState(t *testing.T, what string, a, b *clientv3.Client) {
	t.Helper()
	revA, kvsA, leasesA := etcdState(t, a)
	revB, kvsB, leasesB := etcdState(t, b)
	if revA != revB {
		t.Errorf("%s: revision %d, want %d", what, revB, revA)
	}
	if len(kvsA) != len(kvsB) {
		t.Errorf("%s: %d keys, want %d", what, len(kvsB), len(kvsA))
	}
	for i := range min(len(kvsA), len(kvsB)) {
		if kvsA[i] != kvsB[i] {
			t.Errorf("%s: key %d is %.120v, want %.120v", what, i, kvsB[i], kvsA[i])
		}
	}
	if fmt.Sprint(leasesA) != fmt.Sprint(leasesB) {
		t.Errorf("%s: leases %v, want %v", what, leasesB, leasesA)
	}
}

// fillEtcd writes what a backup must carry: several versions of a key, a
// transaction putting several keys at one revision, deletes, a lease with
// keys, an empty value, a value spanning several snapshot chunks and keys
// that are ZooKeeper paths (implicit parents included).
func fillEtcd(t *testing.T, c *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		must(c.Put(ctx, fmt.Sprintf("k/%03d", i), strings.Repeat("v", i)))
	}
	must(c.Put(ctx, "k/001", "second"))
	must(c.Put(ctx, "k/001", "third"))
	must(c.Txn(ctx).Then(clientv3.OpPut("txn/a", "1"), clientv3.OpPut("txn/b", "2"), clientv3.OpPut("txn/c", "3")).Commit())
	must(c.Delete(ctx, "k/010"))
	must(c.Delete(ctx, "k/02", clientv3.WithPrefix()))
	lease, err := c.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	must(c.Put(ctx, "/app/locks/a", "held", clientv3.WithLease(lease.ID)))
	must(c.Put(ctx, "/app/config/deep/x", "x"))
	must(c.Put(ctx, "empty", ""))
	must(c.Put(ctx, "big", strings.Repeat("0123456789abcdef", 150<<10>>4)))
	must(c.Grant(ctx, 600)) // a lease without keys
}

func saveSnapshot(t *testing.T, endpoint, path string) {
	t.Helper()
	out, err := exec.Command(testenv.EtcdctlPath(t), "--endpoints", endpoint, "snapshot", "save", path).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl snapshot save: %v\n%s", err, out)
	}
}

func restoreSnapshot(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := runSnapshot(append([]string{"restore"}, args...), &stdout, &stderr); err != nil {
		t.Fatalf("janus snapshot restore %q: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// TestSnapshotSaveRestoresIntoRealEtcd is the exit path: etcdctl saves a
// snapshot of Janus, the real etcdutl restores it, and a real etcd started
// on that directory serves the same keys, revisions and leases, and takes
// writes from the next revision on.
func TestSnapshotSaveRestoresIntoRealEtcd(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	src := janustest.EtcdClient(t, a.Etcd)
	fillEtcd(t, src)

	file := filepath.Join(t.TempDir(), "janus.db")
	saveSnapshot(t, a.Etcd, file)
	dir := filepath.Join(t.TempDir(), "etcd")
	out, err := exec.Command(testenv.EtcdutlPath(t), "snapshot", "restore", file, "--data-dir", dir,
		"--name", "reference", "--initial-cluster", "reference=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls", "http://127.0.0.1:2380").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdutl snapshot restore: %v\n%s", err, out)
	}
	ref := testenv.StartEtcdOn(t, dir)
	dst := janustest.EtcdClient(t, strings.TrimPrefix(ref.Endpoints[0], "http://"))
	sameEtcdState(t, "etcd restored from a Janus snapshot", src, dst)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rev, _, _ := etcdState(t, src)
	put, err := dst.Put(ctx, "after", "restore")
	if err != nil {
		t.Fatal(err)
	}
	if put.Header.Revision != rev+1 {
		t.Errorf("first write on the restored etcd at revision %d, want %d", put.Header.Revision, rev+1)
	}
	if _, err := dst.Get(ctx, "k/001", clientv3.WithRev(rev-1)); err == nil {
		t.Errorf("read below the snapshot's revision succeeded; the file carries no history")
	}

	// etcd changed the data after the restore: its snapshot still holds
	// the janus bucket, which no longer matches, so Janus restores what
	// etcd holds now.
	file2 := filepath.Join(t.TempDir(), "etcd.db")
	saveSnapshot(t, strings.TrimPrefix(ref.Endpoints[0], "http://"), file2)
	dir2 := filepath.Join(t.TempDir(), "back")
	if out := restoreSnapshot(t, file2, "--data-dir", dir2); !strings.Contains(out, "restored a etcd backup") {
		t.Errorf("restore of the changed file said %q", out)
	}
	back := startInProcess(t, dir2)
	sameEtcdState(t, "Janus restored from etcd after etcd changed it", dst, janustest.EtcdClient(t, back.Etcd))
}

// TestSnapshotRestoreFromJanusKeepsZooKeeperState restores a Janus snapshot
// into a new Janus: the etcd view and what ZooKeeper clients see (data,
// Stat with cversion and pzxid, ACLs, sequence counters) are unchanged.
func TestSnapshotRestoreFromJanusKeepsZooKeeperState(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	src := janustest.EtcdClient(t, a.Etcd)
	fillEtcd(t, src)
	zc, _ := janustest.ZKClient(t, a.ZK, 10*time.Second)
	acl := append(zk.DigestACL(zk.PermAll, "admin", "secret"), zk.WorldACL(zk.PermRead)...)
	if err := zc.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/zk", "/zk/guarded"} {
		if _, err := zc.Create(p, []byte("data of "+p), 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := zc.Create("/zk/seq-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zc.Delete("/zk/seq-0000000002", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Set("/zk/guarded", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	// The session ends first: a closed session's lease is gone.
	zc.Close()

	file := filepath.Join(t.TempDir(), "janus.db")
	saveSnapshot(t, a.Etcd, file)
	dir := filepath.Join(t.TempDir(), "restored")
	if out := restoreSnapshot(t, file, "--data-dir", dir); !strings.Contains(out, "restored a janus backup") {
		t.Errorf("restore said %q", out)
	}
	b := startInProcess(t, dir)
	sameEtcdState(t, "Janus restored from a Janus snapshot", src, janustest.EtcdClient(t, b.Etcd))

	za, _ := janustest.ZKClient(t, a.ZK, 10*time.Second)
	zb, _ := janustest.ZKClient(t, b.ZK, 10*time.Second)
	for _, c := range []*zk.Conn{za, zb} {
		if err := c.AddAuth("digest", []byte("admin:secret")); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/", "/zk", "/zk/guarded", "/zk/seq-0000000001", "/app", "/app/config/deep"} {
		dataA, statA, errA := za.Get(p)
		dataB, statB, errB := zb.Get(p)
		if errA != nil || errB != nil {
			t.Fatalf("get %s: source %v, restored %v", p, errA, errB)
		}
		if !bytes.Equal(dataA, dataB) || *statA != *statB {
			t.Errorf("%s: restored %q %+v, want %q %+v", p, dataB, *statB, dataA, *statA)
		}
		aclA, _, errA := za.GetACL(p)
		aclB, _, errB := zb.GetACL(p)
		if errA != nil || errB != nil || fmt.Sprint(aclA) != fmt.Sprint(aclB) {
			t.Errorf("%s: restored ACL %v (%v), want %v (%v)", p, aclB, errB, aclA, errA)
		}
	}
	// The sequence counter came along: the next sequential name is the same.
	nameA, errA := za.Create("/zk/seq-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	nameB, errB := zb.Create("/zk/seq-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if errA != nil || errB != nil || nameA != nameB {
		t.Errorf("next sequential node: restored %q (%v), source %q (%v)", nameB, errB, nameA, errA)
	}
}

// TestSnapshotRestoreFromRealEtcd moves an etcd estate into Janus offline:
// etcdctl saves a real etcd's snapshot (with history, compaction and a
// lease), janus restores it, and Janus serves the same keys, revisions,
// versions and leases.
func TestSnapshotRestoreFromRealEtcd(t *testing.T) {
	ref := testenv.StartEtcd(t)
	endpoint := strings.TrimPrefix(ref.Endpoints[0], "http://")
	src := janustest.EtcdClient(t, endpoint)
	fillEtcd(t, src)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rev, _, _ := etcdState(t, src)
	if _, err := src.Compact(ctx, rev-5); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Delete(ctx, "k/049"); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "etcd.db")
	saveSnapshot(t, endpoint, file)
	dir := filepath.Join(t.TempDir(), "restored")
	if out := restoreSnapshot(t, file, "--data-dir", dir); !strings.Contains(out, "restored a etcd backup") {
		t.Errorf("restore said %q", out)
	}
	b := startInProcess(t, dir)
	dst := janustest.EtcdClient(t, b.Etcd)
	sameEtcdState(t, "Janus restored from an etcd snapshot", src, dst)
	// ZooKeeper clients see the paths among the keys, implicit parents too.
	zc, _ := janustest.ZKClient(t, b.ZK, 10*time.Second)
	children, _, err := zc.Children("/app")
	if err != nil || fmt.Sprint(children) != "[config locks]" {
		t.Errorf("children of /app: %v (%v)", children, err)
	}
	data, _, err := zc.Get("/app/config/deep/x")
	if err != nil || string(data) != "x" {
		t.Errorf("/app/config/deep/x: %q (%v)", data, err)
	}
}

// TestSnapshotRestoreRefusesDamagedFiles: a flipped byte or a cut-short
// file is refused before anything is written, with a message that says
// why; --skip-hash-check is the only way past.
func TestSnapshotRestoreRefusesDamagedFiles(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	fillEtcd(t, janustest.EtcdClient(t, a.Etcd))
	file := filepath.Join(t.TempDir(), "janus.db")
	saveSnapshot(t, a.Etcd, file)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/3] ^= 0x40
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"flipped", flipped, "is damaged: sha256 of its content is"},
		{"truncated", good[:len(good)/2], "has no sha256 trailer"},
		{"truncated-at-512", good[:len(good)-512], "is damaged"},
		{"empty", nil, "has no sha256 trailer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.db")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "restored")
			var stdout, stderr bytes.Buffer
			err := runSnapshot([]string{"restore", path, "--data-dir", dir}, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("restore of a %s file: %v, want an error saying %q", c.name, err, c.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the refused restore left %s behind (%v)", dir, err)
			}
		})
	}
}

func TestSnapshotCommandArguments(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "the only subcommand is restore"},
		{[]string{"save"}, "the only subcommand is restore"},
		{[]string{"restore", "f"}, "--data-dir is required"},
		{[]string{"restore", "--data-dir", "d"}, "give one FILE or --from-zk-datadir"},
		{[]string{"restore", "f", "g", "--data-dir", "d"}, "give one FILE or --from-zk-datadir"},
		{[]string{"restore", "f", "--from-zk-datadir", "z", "--data-dir", "d"}, "give one FILE or --from-zk-datadir"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		err := runSnapshot(c.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("janus snapshot %q: %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
}

// TestSnapshotRestoreCluster restores one file into the data directories
// of a 3-member ensemble: the members elect a leader, every one of them
// serves the snapshot's state, and the ensemble takes writes.
func TestSnapshotRestoreCluster(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	src := janustest.EtcdClient(t, a.Etcd)
	fillEtcd(t, src)
	file := filepath.Join(t.TempDir(), "janus.db")
	saveSnapshot(t, a.Etcd, file)

	peers := []string{"1=" + freeAddr(t), "2=" + freeAddr(t), "3=" + freeAddr(t)}
	var clients []*clientv3.Client
	for id := 1; id <= 3; id++ {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("member-%d", id))
		restoreSnapshot(t, file, "--data-dir", dir)
		m := startInProcess(t, dir, "--id", fmt.Sprint(id), "--peers", strings.Join(peers, ","))
		clients = append(clients, janustest.EtcdClient(t, m.Etcd))
	}
	// The first write waits for an election.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rev, _, _ := etcdState(t, src)
	put := putOnceElected(t, ctx, clients[0], "after", "restore", "first write to the restored ensemble")
	if put.Header.Revision != rev+1 {
		t.Errorf("first write at revision %d, want %d", put.Header.Revision, rev+1)
	}
	if _, err := src.Put(ctx, "after", "restore"); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		sameEtcdState(t, fmt.Sprintf("member %d of the restored ensemble", i+1), src, c)
	}
}

// TestSnapshotCarriesAuth: users, roles, permissions and auth switched on
// travel with a snapshot both ways. A Janus snapshot restored by the real
// etcdutl gives an etcd where the same users log in with the same
// passwords and meet the same permissions; that etcd's own snapshot
// restored into Janus does the same (and Janus, which finds no signing key
// for its simple tokens in etcd's file, draws one at the first login).
func TestSnapshotCarriesAuth(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	ctl := func(endpoint string, args ...string) (string, error) {
		out, err := exec.Command(testenv.EtcdctlPath(t), append([]string{"--endpoints", endpoint}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	for _, args := range [][]string{
		{"user", "add", "root:rootpw"},
		{"user", "add", "alice:alicepw"},
		{"user", "add", "bob", "--no-password"},
		{"role", "add", "reader"},
		{"role", "grant-permission", "reader", "read", "k/", "--prefix"},
		{"role", "grant-permission", "reader", "readwrite", "w/", "--prefix"},
		{"role", "grant-permission", "reader", "write", "only", "onlz"},
		{"user", "grant-role", "root", "root"},
		{"user", "grant-role", "alice", "reader"},
		{"user", "grant-role", "bob", "reader"},
		{"put", "k/1", "v1"},
		{"put", "secret", "s"},
		{"auth", "enable"},
	} {
		if out, err := ctl(a.Etcd, args...); err != nil {
			t.Fatalf("etcdctl %v: %v\n%s", args, err, out)
		}
	}
	// What alice may and may not do, and how the server answers, is the
	// same on each server the auth store reaches.
	checkAuth := func(what, endpoint string) {
		t.Helper()
		cases := []struct {
			args []string
			want string // in the output; "" for success
		}{
			{[]string{"--user", "alice:alicepw", "get", "k/1", "--print-value-only"}, "v1"},
			{[]string{"--user", "alice:alicepw", "get", "secret"}, "permission denied"},
			{[]string{"--user", "alice:alicepw", "put", "k/2", "x"}, "permission denied"},
			{[]string{"--user", "alice:alicepw", "put", "w/" + what, "x"}, "OK"},
			{[]string{"--user", "alice:wrong", "get", "k/1"}, "authentication failed"},
			{[]string{"--user", "bob:anything", "get", "k/1"}, "authentication failed"},
			{[]string{"get", "k/1"}, "user name is empty"},
			{[]string{"--user", "root:rootpw", "auth", "status"}, "Authentication Status: true"},
		}
		for _, c := range cases {
			out, _ := ctl(endpoint, c.args...)
			if !strings.Contains(out, c.want) {
				// etcdctl's retries log a line each: the last says why.
				t.Errorf("%s: etcdctl %v said %q, want it to say %q", what, c.args, out[strings.LastIndex(out, "\n")+1:], c.want)
			}
		}
	}
	show := func(endpoint string) string {
		var all []string
		for _, args := range [][]string{{"role", "list"}, {"role", "get", "reader"}, {"user", "list"},
			{"user", "get", "alice"}, {"user", "get", "bob"}, {"user", "get", "root"}} {
			out, err := ctl(endpoint, append([]string{"--user", "root:rootpw"}, args...)...)
			if err != nil {
				t.Fatalf("etcdctl %v: %v\n%s", args, err, out)
			}
			all = append(all, out)
		}
		return strings.Join(all, "\n")
	}
	checkAuth("janus", a.Etcd)
	want := show(a.Etcd)

	file := filepath.Join(t.TempDir(), "janus.db")
	if out, err := ctl(a.Etcd, "--user", "root:rootpw", "snapshot", "save", file); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "etcd")
	out, err := exec.Command(testenv.EtcdutlPath(t), "snapshot", "restore", file, "--data-dir", dir,
		"--name", "reference", "--initial-cluster", "reference=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls", "http://127.0.0.1:2380").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdutl snapshot restore: %v\n%s", err, out)
	}
	ref := strings.TrimPrefix(testenv.StartEtcdOn(t, dir).Endpoints[0], "http://")
	checkAuth("etcd", ref)
	if got := show(ref); got != want {
		t.Errorf("etcd restored from a Janus snapshot shows\n%s\nwant (as Janus)\n%s", got, want)
	}

	// The restored etcd took a write (w/etcd) and its file no longer
	// matches the janus bucket: Janus restores etcd's own records.
	file2 := filepath.Join(t.TempDir(), "etcd.db")
	if out, err := ctl(ref, "--user", "root:rootpw", "snapshot", "save", file2); err != nil {
		t.Fatalf("snapshot save from etcd: %v\n%s", err, out)
	}
	dir2 := filepath.Join(t.TempDir(), "back")
	if out := restoreSnapshot(t, file2, "--data-dir", dir2); !strings.Contains(out, "restored a etcd backup") {
		t.Errorf("restore of etcd's file said %q", out)
	}
	back := startInProcess(t, dir2)
	checkAuth("back", back.Etcd)
	if got := show(back.Etcd); got != want {
		t.Errorf("Janus restored from etcd's snapshot shows\n%s\nwant\n%s", got, want)
	}
}
