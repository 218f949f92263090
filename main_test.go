package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/januskv/janus/internal/testenv"
)

// startInProcess runs the server on free loopback ports until the test
// ends; extra flags (--id, --peers) make it a member of an ensemble.
func startInProcess(t *testing.T, dataDir string, extra ...string) Addrs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Addrs, 1)
	done := make(chan error, 1)
	var stderr bytes.Buffer
	args := append([]string{"--data-dir", dataDir, "--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, extra...)
	go func() {
		done <- run(ctx, args, &syncWriter{w: &stderr}, ready)
	}()
	select {
	case a := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server stopped with %v", err)
			}
		})
		return a
	case err := <-done:
		cancel()
		t.Fatalf("server did not start: %v\n%s", err, stderr.String())
	}
	return Addrs{}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestBothFacesServeOneTree(t *testing.T) {
	a := startInProcess(t, t.TempDir())
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put, err := cli.Put(ctx, "/apps/web", "from-etcd")
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := zk.Connect([]string{a.ZK}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data, stat, err := conn.Get("/apps/web")
	if err != nil {
		t.Fatalf("ZooKeeper get of an etcd key: %v", err)
	}
	if string(data) != "from-etcd" || stat.Czxid != put.Header.Revision || stat.Version != 0 {
		t.Fatalf("ZooKeeper sees %q %+v; etcd wrote at revision %d", data, stat, put.Header.Revision)
	}
	if _, err := conn.Set("/apps/web", []byte("from-zk"), 0); err != nil {
		t.Fatal(err)
	}
	got, err := cli.Get(ctx, "/apps/web")
	if err != nil || string(got.Kvs[0].Value) != "from-zk" || got.Kvs[0].Version != 2 {
		t.Fatalf("etcd sees %v %v", got, err)
	}
	resp, err := httpGet("http://" + a.HTTP + "/health")
	if err != nil || !strings.Contains(resp, `"health":"true"`) {
		t.Fatalf("/health: %q %v", resp, err)
	}
}

func httpGet(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestStartupErrorsAreOneClearLine(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	free := []string{"--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"port in use", append([]string{"--data-dir", t.TempDir(), "--etcd-listen", busy.Addr().String()}, free[2:]...), "already in use"},
		{"data dir is a file", append([]string{"--data-dir", file}, free...), "data dir"},
		{"bad peers", []string{"--peers", "x"}, "--peers"},
		{"stray argument", []string{"serve"}, "unexpected argument"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		err := run(context.Background(), c.args, &out, nil)
		if err == nil || !strings.Contains(err.Error()+out.String(), c.want) {
			t.Errorf("%s: got %v (output %q), want an error mentioning %q", c.name, err, out.String(), c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans several lines: %q", c.name, err)
		}
	}
}

func TestSecondServerOnTheSameDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	startInProcess(t, dir)
	err := run(context.Background(), []string{"--data-dir", dir, "--etcd-listen", "127.0.0.1:0", "--zk-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, &bytes.Buffer{}, nil)
	if err == nil {
		t.Fatal("a second server opened a data dir in use")
	}
}

// TestAcknowledgedWritesSurviveSIGKILLOfTheBinary loads a real janus
// process through clientv3 and go-zookeeper, kills it with SIGKILL, restarts
// it on the same data dir and checks every acknowledged write.
func TestAcknowledgedWritesSurviveSIGKILLOfTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	bin := filepath.Join(t.TempDir(), "janus")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	etcdAddr, zkAddr := freeAddr(t), freeAddr(t)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "--data-dir", dir, "--etcd-listen", etcdAddr, "--zk-listen", zkAddr, "--http-listen", "127.0.0.1:0")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "janus started") {
				go func() {
					for sc.Scan() {
					}
				}()
				return cmd
			}
		}
		t.Fatal("janus exited before it started")
		return nil
	}
	cmd := start()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	conn, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("/load/w%d-%d", w, i)
				var rev int64
				if w%2 == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					resp, err := cli.Put(ctx, key, "v")
					cancel()
					if err != nil {
						return
					}
					rev = resp.Header.Revision
				} else {
					if _, err := conn.Create(key, []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
						if err == zk.ErrNoNode {
							conn.Create("/load", nil, 0, zk.WorldACL(zk.PermAll))
							continue
						}
						return
					}
					rev = -1
				}
				mu.Lock()
				acked[key] = rev
				n := len(acked)
				mu.Unlock()
				if n == 400 {
					cmd.Process.Signal(syscall.SIGKILL)
				}
			}
		}()
	}
	cmd.Wait()
	close(stop)
	conn.Close()
	wg.Wait()
	cmd = start()
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 400 {
		t.Fatalf("only %d writes acknowledged before the kill", len(acked))
	}
	for key, rev := range acked {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 {
			t.Fatalf("acknowledged write %s lost after SIGKILL", key)
		}
		if rev > 0 && resp.Kvs[0].ModRevision != rev {
			t.Fatalf("%s at revision %d, acknowledged at %d", key, resp.Kvs[0].ModRevision, rev)
		}
	}
	t.Logf("%d acknowledged writes (etcd and ZooKeeper) all present after SIGKILL", len(acked))
}

func freeAddr(t *testing.T) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePorts(t, 1)[0]))
}

// putOnceElected puts key=value through cli, sending it again while the
// ensemble answers "no leader" (refused before anything is proposed, so
// safe to resend), and fails the test on any other error or when ctx
// ends first.
func putOnceElected(t *testing.T, ctx context.Context, cli *clientv3.Client, key, value, what string) *clientv3.PutResponse {
	t.Helper()
	for {
		put, err := cli.Put(ctx, key, value)
		if err == nil {
			return put
		}
		if !errors.Is(err, rpctypes.ErrNoLeader) || ctx.Err() != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
