package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// connectZK opens a go-zookeeper session to addrs and waits until it has one.
func connectZK(t *testing.T, addrs ...string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connect %v: %v", addrs, err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(time.Minute)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatalf("no session with %v", addrs)
		}
	}
}

func TestZooKeeperStandalone(t *testing.T) {
	z := StartZooKeeper(t, ZKOptions{})
	conn := connectZK(t, z.Addr)

	if _, err := conn.Create("/smoke", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, stat, err := conn.Get("/smoke")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if string(got) != "hello" || stat.Version != 0 {
		t.Errorf("get /smoke = %q version %d, want %q version 0", got, stat.Version, "hello")
	}

	// TTL nodes only exist when extended types are on, which is the default.
	if _, err := conn.CreateTTL("/ttl", nil, zk.FlagTTL, zk.WorldACL(zk.PermAll), time.Hour); err != nil {
		t.Errorf("create TTL node (extended types should be enabled): %v", err)
	}

	mntr, err := FourLetterWord(t.Context(), z.Addr, "mntr")
	if err != nil || !strings.Contains(mntr, "zk_version\t3.8") {
		t.Errorf("mntr = %q, %v; want a 3.8 zk_version line", mntr, err)
	}
}

func TestZooKeeperEnsemble(t *testing.T) {
	e := StartZooKeeperEnsemble(t, 3)
	if len(e.Addrs()) != 3 {
		t.Fatalf("ensemble addrs = %v, want 3", e.Addrs())
	}
	if _, err := e.Leader(t.Context()); err != nil {
		t.Fatalf("leader: %v", err)
	}
	writer := connectZK(t, e.Servers[0].Addr)
	if _, err := writer.Create("/replicated", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create on server 1: %v", err)
	}
	reader := connectZK(t, e.Servers[2].Addr)
	// ZooKeeper reads are served locally: sync first to see the write.
	if _, err := reader.Sync("/replicated"); err != nil {
		t.Fatalf("sync on server 3: %v", err)
	}
	got, _, err := reader.Get("/replicated")
	if err != nil || string(got) != "v" {
		t.Fatalf("get on server 3 = %q, %v; want %q", got, err, "v")
	}
}

func TestEtcdEmbedded(t *testing.T) {
	e := StartEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	put, err := cli.Put(ctx, "k", "v")
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" || resp.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("get k = %v, want v at revision %d", resp.Kvs, put.Header.Revision)
	}
}

// etcdctl runs the etcdctl binary and returns its stdout.
func etcdctl(t *testing.T, bin string, endpoints []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	full := append([]string{"--endpoints", strings.Join(endpoints, ",")}, args...)
	out, err := exec.CommandContext(ctx, bin, full...).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl %v: %v\n%s", full, err, out)
	}
	return string(out)
}

func TestEtcdctlAgainstEmbeddedEtcd(t *testing.T) {
	bin := EtcdctlPath(t)
	e := StartEtcd(t)
	if out := etcdctl(t, bin, e.Endpoints, "put", "a", "b"); out != "OK\n" {
		t.Errorf("etcdctl put = %q, want OK", out)
	}
	if out := etcdctl(t, bin, e.Endpoints, "get", "a"); out != "a\nb\n" {
		t.Errorf("etcdctl get = %q, want key and value lines", out)
	}
}

func TestEtcdProcess(t *testing.T) {
	e := StartEtcdProcess(t)
	bin := EtcdctlPath(t)
	etcdctl(t, bin, e.Endpoints, "put", "x", "y")
	if out := etcdctl(t, bin, e.Endpoints, "get", "x", "--print-value-only"); out != "y\n" {
		t.Errorf("etcdctl get from etcd process = %q, want y", out)
	}
	if out := etcdctl(t, bin, e.Endpoints, "version"); !strings.Contains(out, "3.7.3") {
		t.Errorf("etcdctl version = %q, want 3.7.3", out)
	}
}

const kazooCreate = `
import sys
from kazoo.client import KazooClient

zk = KazooClient(hosts=sys.argv[1])
zk.start(timeout=60)
zk.create(sys.argv[2], sys.argv[3].encode(), makepath=True)
data, stat = zk.get(sys.argv[2])
print(data.decode(), stat.version)
zk.stop()
zk.close()
`

func TestKazoo(t *testing.T) {
	z := StartZooKeeper(t, ZKOptions{})
	out := RunPython(t, kazooCreate, z.Addr, "/kazoo/node", "from-kazoo")
	if out != "from-kazoo 0\n" {
		t.Errorf("kazoo printed %q, want %q", out, "from-kazoo 0\n")
	}
	conn := connectZK(t, z.Addr)
	got, _, err := conn.Get("/kazoo/node")
	if err != nil || string(got) != "from-kazoo" {
		t.Errorf("go-zookeeper get of kazoo's node = %q, %v", got, err)
	}
}

func TestCurator(t *testing.T) {
	z := StartZooKeeper(t, ZKOptions{})
	out := RunJava(t, "testdata/CuratorSmoke.java", "CuratorSmoke", z.Addr, "/locks/smoke")
	want := "acquired, lock nodes: 1\nreleased, lock nodes: 0\n"
	if out != want {
		t.Errorf("CuratorSmoke printed %q, want %q", out, want)
	}
	// A second run reuses the compiled classes and sees the same lock path.
	if again := RunJava(t, "testdata/CuratorSmoke.java", "CuratorSmoke", z.Addr, "/locks/smoke"); again != want {
		t.Errorf("second CuratorSmoke printed %q, want %q", again, want)
	}
}

func TestZkCli(t *testing.T) {
	z := StartZooKeeper(t, ZKOptions{})
	out := ZkCli(t, z.Addr, "create /x 1", "get /x", "get /missing")
	want := "Created /x\n1\nNode does not exist: /missing\n"
	if out != want {
		t.Errorf("zkCli output = %q, want %q", out, want)
	}
}

func TestZkMode(t *testing.T) {
	tests := []struct {
		srvr string
		want string
	}{
		{"Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: standalone\nNode count: 5\n", "standalone"},
		{"Mode: follower\n", "follower"},
		{"Mode: leader", "leader"},
		{"This ZooKeeper instance is not currently serving requests\n", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := zkMode(tt.srvr); got != tt.want {
			t.Errorf("zkMode(%q) = %q, want %q", tt.srvr, got, tt.want)
		}
	}
}

func TestCleanZkCliOutput(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			name: "created on stderr after chatter",
			in: "SLF4J: Failed to load class \"org.slf4j.impl.StaticLoggerBinder\".\nConnecting to 127.0.0.1:2181\n\n" +
				"WATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null\nCreated /x\n",
			want: "Created /x\n",
		},
		{
			name: "multi-line output keeps inner blank lines",
			in:   "Connecting to h:1\n\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null\na\n\nb\n",
			want: "a\n\nb\n",
		},
		{name: "nothing printed", in: "Connecting to h:1\n", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cleanZkCliOutput(tt.in); got != tt.want {
				t.Errorf("cleanZkCliOutput = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRenderZooCfg(t *testing.T) {
	got := renderZooCfg(map[string]string{"tickTime": "2000", "clientPort": "1"}, []string{"server.1=127.0.0.1:2:3"})
	want := "clientPort=1\ntickTime=2000\nserver.1=127.0.0.1:2:3\n"
	if got != want {
		t.Errorf("renderZooCfg = %q, want %q", got, want)
	}
}

// recordingTB captures how Need ends a test instead of ending this one.
type recordingTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordingTB) Helper()                           {}
func (r *recordingTB) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recordingTB) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

func TestNeed(t *testing.T) {
	tests := []struct {
		name      string
		ci        string
		ok        bool
		wantFatal bool
		wantSkip  bool
	}{
		{name: "available", ci: "true", ok: true},
		{name: "missing in CI fails", ci: "true", ok: false, wantFatal: true},
		{name: "missing locally skips", ci: "", ok: false, wantSkip: true},
		{name: "CI must be exactly true", ci: "1", ok: false, wantSkip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			r := &recordingTB{TB: t}
			Need(r, "kazoo", tt.ok, "import failed")
			if (r.fatal != "") != tt.wantFatal || (r.skip != "") != tt.wantSkip {
				t.Fatalf("fatal=%q skip=%q, want fatal %v skip %v", r.fatal, r.skip, tt.wantFatal, tt.wantSkip)
			}
			for _, msg := range []string{r.fatal, r.skip} {
				if msg != "" && !strings.Contains(msg, "python3-kazoo") {
					t.Errorf("message %q does not name the Debian package python3-kazoo", msg)
				}
			}
		})
	}
}

// TestClaimPortIsExclusiveAcrossProcesses: a port FreePorts handed out is
// locked for the life of the process, so neither this process nor another
// (here, a second open file description, which flock treats as another
// holder) can claim it again.
func TestClaimPortIsExclusiveAcrossProcesses(t *testing.T) {
	port := FreePorts(t, 1)[0]
	if claimPort(port) {
		t.Fatalf("port %d claimed twice by one process", port)
	}
	f, err := os.Open(filepath.Join(os.TempDir(), "janus-test-ports", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("another holder locked port %d's file: %v, want EWOULDBLOCK", port, err)
	}
}
