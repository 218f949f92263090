package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Etcd is a real etcd server running inside the test binary.
type Etcd struct {
	// Endpoints are the client URLs, for clientv3 and etcdctl --endpoints.
	Endpoints []string
	// Server is the embedded server, for tests that need its internals.
	Server *embed.Etcd
}

// StartEtcd starts a single-member etcd on loopback ports with its data in a
// temporary directory, and waits until it serves clients.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return StartEtcdOn(t, t.TempDir())
}

// StartEtcdOn starts a single-member etcd named "reference" on dir, a new
// directory or one that etcd (or `etcdutl snapshot restore --name
// reference`) filled before, and waits until it serves clients.
func StartEtcdOn(t testing.TB, dir string) *Etcd {
	t.Helper()
	const attempts = 3
	var lastErr error
	for range attempts {
		e, err := startEtcdOnce(t, dir)
		if err == nil {
			return e
		}
		lastErr = err
		// Another process may have bound a port freePorts handed out.
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("testenv: start embedded etcd: %v", lastErr)
	return nil
}

func startEtcdOnce(t testing.TB, dir string) (*Etcd, error) {
	t.Helper()
	ports := freePorts(t, 2)
	clientURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[0])}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[1])}

	cfg := embed.NewConfig()
	cfg.Name = "reference"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The log goes to a file, printed only if the test fails: etcd logs
	// errors on every normal Close ("mux: server closed"), which would
	// otherwise bury the output of passing tests.
	logPath := filepath.Join(t.TempDir(), "etcd.log")
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{logPath}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("server failed before ready: %w; log:\n%s", err, readTail(logPath, 60))
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("not ready: %w; log:\n%s", ctx.Err(), readTail(logPath, 60))
	}
	t.Cleanup(func() {
		e.Close()
		if t.Failed() {
			t.Logf("testenv: log of embedded etcd (%s):\n%s", logPath, readTail(logPath, 200))
		}
	})
	return &Etcd{Endpoints: []string{clientURL.String()}, Server: e}, nil
}

// EtcdctlPath returns the path of a real etcdctl, built once into the
// repository's bin/ at the version go.mod's tool block pins.
func EtcdctlPath(t testing.TB) string {
	t.Helper()
	return buildTool(t, "etcdctl", "go.etcd.io/etcd/etcdctl/v3", []string{"version"}, "etcdctl version: ")
}

// EtcdutlPath returns the path of a real etcdutl (offline snapshot
// restore), built once into the repository's bin/ at the version go.mod's
// tool block pins.
func EtcdutlPath(t testing.TB) string {
	t.Helper()
	return buildTool(t, "etcdutl", "go.etcd.io/etcd/etcdutl/v3", []string{"version"}, "etcdutl version: ")
}

// EtcdPath returns the path of a real etcd server binary, built once into
// the repository's bin/ at the version go.mod's tool block pins.
func EtcdPath(t testing.TB) string {
	t.Helper()
	return buildTool(t, "etcd", "go.etcd.io/etcd/server/v3", []string{"--version"}, "etcd Version: ")
}

// buildTool makes bin/<name> hold module pkg at the version go.mod requires.
// Test binaries of several packages run in parallel, so an exclusive file
// lock serializes the check and the build, and the binary appears under its
// name only by an atomic rename once complete.
func buildTool(t testing.TB, name, pkg string, versionArgs []string, versionPrefix string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	Need(t, "go", err == nil, fmt.Sprintf("go not on PATH: %v", err))

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	root, err := repoRoot(ctx, goBin)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	want, err := goOutput(ctx, goBin, root, "list", "-m", "-f", "{{.Version}}", pkg)
	if err != nil {
		t.Fatalf("testenv: version of %s in go.mod: %v", pkg, err)
	}
	want = strings.TrimPrefix(want, "v")

	binDir := filepath.Join(root, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	unlock, err := lockFile(filepath.Join(binDir, ".tools.lock"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer unlock()

	path := filepath.Join(binDir, name)
	if got := toolVersion(ctx, path, versionArgs, versionPrefix); got == want {
		return path
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	defer os.Remove(tmp)
	build := exec.CommandContext(ctx, goBin, "build", "-o", tmp, pkg)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("testenv: build %s (%s): %v\n%s", name, pkg, err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("testenv: install %s: %v", name, err)
	}
	if got := toolVersion(ctx, path, versionArgs, versionPrefix); got != want {
		t.Fatalf("testenv: built %s reports version %q, go.mod requires %q", name, got, want)
	}
	return path
}

// toolVersion runs the tool's version command and returns the version after
// prefix, or "" if the tool is missing or says something else.
func toolVersion(ctx context.Context, path string, args []string, prefix string) string {
	out, err := exec.CommandContext(ctx, path, args...).Output()
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// repoRoot returns the directory of the main module's go.mod.
func repoRoot(ctx context.Context, goBin string) (string, error) {
	gomod, err := goOutput(ctx, goBin, "", "env", "GOMOD")
	if err != nil {
		return "", fmt.Errorf("locate go.mod: %w", err)
	}
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("locate go.mod: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

func goOutput(ctx context.Context, goBin, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, exitErr.Stderr)
		}
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// lockFile takes an exclusive flock on path, blocking until it is free, and
// returns its release.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// EtcdProcess is a real etcd server running as its own process, for tests
// and benchmarks that must not share the test binary's CPU scheduler, heap or
// garbage collector with it, or that crash it.
type EtcdProcess struct {
	// Endpoints are the client URLs.
	Endpoints []string
	// DataDir holds its WAL and snapshots.
	DataDir string

	proc *process
}

// Stop kills the server at once, as a crash would. Cleanup calls it too.
func (e *EtcdProcess) Stop() { e.proc.stop() }

// Log returns what the server has logged so far.
func (e *EtcdProcess) Log() string { return e.proc.log() }

// StartEtcdProcess starts the etcd binary from EtcdPath as a single-member
// cluster on loopback ports and waits until its /health says true.
func StartEtcdProcess(t testing.TB) *EtcdProcess {
	t.Helper()
	bin := EtcdPath(t)
	const attempts = 3
	var lastErr error
	for range attempts {
		e, err := startEtcdProcessOnce(t, bin)
		if err == nil {
			return e
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("testenv: start etcd process: %v", lastErr)
	return nil
}

func startEtcdProcessOnce(t testing.TB, bin string) (*EtcdProcess, error) {
	t.Helper()
	ports := freePorts(t, 2)
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	cmd := exec.Command(bin,
		"--name", "reference",
		"--data-dir", dataDir,
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "reference="+peerURL,
		"--log-level", "warn",
	)
	cmd.Dir = root
	proc, err := startProcess(t, "etcd", cmd, filepath.Join(root, "etcd.log"))
	if err != nil {
		return nil, err
	}
	e := &EtcdProcess{Endpoints: []string{clientURL}, DataDir: dataDir, proc: proc}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if done, err := proc.exited(); done {
			if strings.Contains(e.Log(), "address already in use") {
				return nil, fmt.Errorf("etcd exited: %w", errPortTaken)
			}
			return nil, fmt.Errorf("etcd exited before serving (%v); log:\n%s", err, tail(e.Log(), 60))
		}
		if etcdHealthy(ctx, clientURL) {
			return e, nil
		}
		select {
		case <-ctx.Done():
			e.Stop()
			return nil, fmt.Errorf("etcd not healthy: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// etcdHealthy reports whether etcd's /health endpoint says it is healthy.
func etcdHealthy(ctx context.Context, clientURL string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}
