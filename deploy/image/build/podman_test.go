//go:build linux

package build

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestImageRunsUnderPodman loads the image tarball into a real container
// engine (Debian's podman) and runs it as an operator would: its own
// network namespace with the ports published, its health check, the etcd
// face through etcdctl, the ZooKeeper face through go-zookeeper, a restart
// that keeps the data volume, and a stop that ends the server cleanly.
//
// Without podman it skips, except under CI=true, whose machines install it
// (see .ci/run). The engine runs with what this kind of machine allows: its
// storage in the test's own directory (vfs, so nothing is mounted), runc
// rather than crun (crun refuses the hybrid cgroup layout), cgroupfs,
// slirp4netns for the network, and limits no higher than the test's own
// (raising RLIMIT_NPROC to podman's default is not permitted here).
func TestImageRunsUnderPodman(t *testing.T) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("podman is not installed, and CI must run the image (.ci/run installs podman and runc): %v", err)
		}
		t.Skip("podman is not installed (apt-get install podman runc slirp4netns): the image is not run")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	repo := filepath.Join("..", "..", "..")

	// The image needs a static binary: its base is empty.
	bin := filepath.Join(dir, "janus")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, ".")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build janus: %v\n%s", err, out)
	}
	tarPath := filepath.Join(dir, "image.tar")
	const tag = "localhost/janus:podman-test"
	if _, err := Write(bin, tarPath, tag); err != nil {
		t.Fatal(err)
	}

	global := []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
	}
	if runc, err := exec.LookPath("runc"); err == nil {
		global = append(global, "--runtime", runc)
	}
	podmanIn := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, podman, append(slices.Clone(global), args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			return stdout.String(), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(stdout.String()), nil
	}
	pm := func(args ...string) (string, error) { return podmanIn(ctx, args...) }
	must := func(args ...string) string {
		t.Helper()
		out, err := pm(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	if out := must("load", "-i", tarPath); !strings.Contains(out, tag) {
		t.Fatalf("podman load: %s", out)
	}
	name := fmt.Sprintf("janus-podman-test-%d", os.Getpid())
	// The container must go before the test's directory does (its shm
	// is a mount there), whatever ended the test: with a context of its
	// own, as the test's is over by then.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := podmanIn(ctx, "rm", "-f", "-v", "-t", "10", name); err != nil {
			t.Errorf("remove the container: %v", err)
		}
		if _, err := podmanIn(ctx, "rmi", "-f", tag); err != nil {
			t.Errorf("remove the image: %v", err)
		}
	})
	nofile, nproc := limit(syscall.RLIMIT_NOFILE, 4096), limit(rlimitNproc, 4096)
	must("run", "-d", "--name", name,
		"--network", "slirp4netns",
		"-p", "127.0.0.1::2379", "-p", "127.0.0.1::2181", "-p", "127.0.0.1::8080",
		"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile, nofile),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", nproc, nproc),
		// No timer for the health check (podman needs systemd for one):
		// the test runs it itself.
		"--health-interval", "disable",
		tag)
	logs := func() string { out, _ := pm("logs", name); return out }
	port := func(p string) string {
		t.Helper()
		out := must("port", name, p+"/tcp")
		return strings.TrimSpace(strings.Split(out, "\n")[0])
	}
	etcdAddr, zkAddr, httpAddr := port("2379"), port("2181"), port("8080")

	waitReady := func() {
		t.Helper()
		for {
			resp, err := http.Get("http://" + httpAddr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("/readyz never answered 200 (last: %v)\n%s", err, logs())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	waitReady()
	// The image's own health check (janus probe inside the container).
	must("healthcheck", "run", name)
	if out := must("top", name, "huser"); !strings.Contains(out, "65532") {
		t.Errorf("the server does not run as the image's user 65532:\n%s", out)
	}

	etcdctl := etcdctlPath(t, ctx, repo, dir)
	ctl := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, etcdctl, append([]string{"--endpoints", etcdAddr}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("etcdctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ctl("put", "/podman/etcd", "from etcd")
	if out := ctl("get", "/podman/etcd", "--print-value-only"); strings.TrimSpace(out) != "from etcd" {
		t.Fatalf("etcdctl get: %q", out)
	}

	conn, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/podman/zk", []byte("from zookeeper"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("ZooKeeper create: %v", err)
	}
	if data, _, err := conn.Get("/podman/etcd"); err != nil || string(data) != "from etcd" {
		t.Fatalf("ZooKeeper get of the etcd key: %q, %v", data, err)
	}
	conn.Close()
	if out := ctl("get", "/podman/zk", "--print-value-only"); strings.TrimSpace(out) != "from zookeeper" {
		t.Fatalf("etcdctl get of the znode: %q", out)
	}

	// A stop is SIGTERM, which the server answers by stopping cleanly; a
	// start finds the data on the volume.
	must("stop", "-t", "60", name)
	if code := must("inspect", name, "--format", "{{.State.ExitCode}}"); code != "0" {
		t.Fatalf("exit code %s after podman stop\n%s", code, logs())
	}
	must("start", name)
	etcdAddr, httpAddr = port("2379"), port("8080")
	waitReady()
	if out := ctl("get", "/podman/zk", "--print-value-only"); strings.TrimSpace(out) != "from zookeeper" {
		t.Fatalf("after a restart: %q", out)
	}
}

// rlimitNproc is Linux's RLIMIT_NPROC, which package syscall does not name.
const rlimitNproc = 6

// limit returns the resource's soft limit, at most def.
func limit(resource int, def uint64) uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(resource, &l); err != nil {
		return def
	}
	return min(l.Cur, def)
}

// etcdctlPath returns the repository's bin/etcdctl (make tools builds it)
// or builds one at the version the repository's go.mod pins.
func etcdctlPath(t *testing.T, ctx context.Context, repo, dir string) string {
	t.Helper()
	if p := filepath.Join(repo, "bin", "etcdctl"); fileExists(p) {
		return p
	}
	p := filepath.Join(dir, "etcdctl")
	build := exec.CommandContext(ctx, "go", "build", "-o", p, "go.etcd.io/etcd/etcdctl/v3")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build etcdctl: %v\n%s", err, out)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
