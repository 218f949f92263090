package cluster

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/januskv/janus/internal/testenv"
)

// Build compiles the janus binary (the module root's main package) into
// dir and returns its path. Call it once per test binary, from TestMain,
// and share the path: building is the slow part of starting a cluster.
func Build(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("cluster: locate the module: %w", err)
	}
	root := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "janus")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: go build: %w\n%s", err, out)
	}
	return bin, nil
}

// Options configure a process cluster.
type Options struct {
	// Binary is the janus binary to run (see Build).
	Binary string
	// Nodes is the ensemble size (default 3).
	Nodes int
	// SelfPeer gives a single node --peers naming only itself, so that it
	// has a peer address and can grow; without it a single node runs with
	// no peers.
	SelfPeer bool
	// Args are extra flags for every node.
	Args []string
	// ReadyTimeout bounds how long a node may take to answer /health
	// (default 30s).
	ReadyTimeout time.Duration
	// ExpectErrors is set by a test that makes members log at ERROR on
	// purpose. Otherwise an ERROR record in any member's log fails the test
	// when it ends: a member that met something it could not handle is a
	// failure even if the clients never noticed.
	ExpectErrors bool
}

// Node is one member process and where it listens.
type Node struct {
	ID       uint64
	DataDir  string
	EtcdAddr string
	ZKAddr   string
	HTTPAddr string
	PeerAddr string
	LogPath  string

	// ensemble are the flags naming the ensemble this node starts with
	// (--peers and the rest): the initial ones, or for a node that joined
	// a running ensemble those it was started with (see Join). A restart
	// reuses them, stale or not, as an operator's service unit would.
	ensemble []string
	// idFlag is the --id value, when not the decimal ID.
	idFlag string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has been reaped
}

// Cluster is a set of janus processes on loopback.
type Cluster struct {
	t     testing.TB
	opts  Options
	Nodes []*Node
	base  string // where data dirs and logs go
	added int    // nodes NewNode laid out, to name their directories

	etcdctlOnce sync.Once
	etcdctl     string // the etcdctl binary, once Etcdctl has located it
}

// Start starts opts.Nodes processes and waits until each answers /health.
// The processes are killed when the test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.Binary == "" {
		t.Fatal("cluster: Options.Binary is empty (build it with cluster.Build in TestMain)")
	}
	ports := freePorts(t, 4*opts.Nodes)
	base := t.TempDir()
	if keep := os.Getenv("JANUS_CLUSTER_DIR"); keep != "" {
		// Data dirs and logs that outlive the test, to examine a failure
		// (a divergence, say) after the fact.
		dir, err := os.MkdirTemp(keep, strings.NewReplacer("/", "_").Replace(t.Name())+"-")
		if err != nil {
			t.Fatalf("cluster: JANUS_CLUSTER_DIR: %v", err)
		}
		t.Logf("cluster: data dirs and logs kept under %s", dir)
		base = dir
	}
	c := &Cluster{t: t, opts: opts, base: base}
	var peers, etcds, zks []string
	for i := range opts.Nodes {
		id := uint64(i + 1)
		n := c.newNode(fmt.Sprintf("node%d", id), ports[4*i:4*i+4])
		n.ID = id
		c.Nodes = append(c.Nodes, n)
		peers = append(peers, fmt.Sprintf("%d=%s", id, n.PeerAddr))
		etcds = append(etcds, fmt.Sprintf("%d=%s", id, n.EtcdAddr))
		zks = append(zks, fmt.Sprintf("%d=%s", id, n.ZKAddr))
	}
	if opts.Nodes > 1 || opts.SelfPeer {
		args := []string{"--peers", strings.Join(peers, ","), "--peer-etcd", strings.Join(etcds, ","), "--peer-zk", strings.Join(zks, ",")}
		for _, n := range c.Nodes {
			n.ensemble = args
		}
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			c.kill(n)
		}
		for _, n := range c.Nodes {
			if lines := errorLines(n.LogPath); len(lines) > 0 && !opts.ExpectErrors {
				t.Errorf("cluster: node %d logged %d unexpected ERROR records (%s), the first:\n%s", n.ID, len(lines), n.LogPath, strings.Join(lines[:min(len(lines), 5)], "\n"))
			}
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("cluster: log of node %d (%s):\n%s", n.ID, n.LogPath, tail(n.LogPath, 60))
			}
		}
	})
	for _, n := range c.Nodes {
		if err := c.spawn(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitReady(n); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// newNode lays out a node named name: its data dir and log under the
// cluster's directory, and its four addresses on the given ports.
func (c *Cluster) newNode(name string, ports []int) *Node {
	addr := func(k int) string { return "127.0.0.1:" + strconv.Itoa(ports[k]) }
	return &Node{
		DataDir:  filepath.Join(c.base, name),
		EtcdAddr: addr(0), ZKAddr: addr(1), HTTPAddr: addr(2), PeerAddr: addr(3),
		LogPath: filepath.Join(c.base, name+".log"),
	}
}

func (c *Cluster) spawn(n *Node) error {
	id := n.idFlag
	if id == "" {
		id = strconv.FormatUint(n.ID, 10)
	}
	args := []string{
		"--id", id,
		"--data-dir", n.DataDir,
		"--etcd-listen", n.EtcdAddr, "--zk-listen", n.ZKAddr, "--http-listen", n.HTTPAddr,
	}
	args = append(args, n.ensemble...)
	args = append(args, c.opts.Args...)
	logFile, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: node %d log: %w", n.ID, err)
	}
	cmd := exec.Command(c.opts.Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("cluster: start node %d: %w", n.ID, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logFile.Close()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

// waitReady polls the node's /health until it answers at all: the process
// is up and serving. (It may answer 503 while there is no leader; a
// restarted member of a cluster without a quorum is up but not healthy.)
func (c *Cluster) waitReady(n *Node) error {
	deadline := time.Now().Add(c.opts.ReadyTimeout)
	client := &http.Client{Timeout: time.Second}
	for {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("cluster: node %d exited while starting:\n%s", n.ID, tail(n.LogPath, 30))
		default:
		}
		resp, err := client.Get("http://" + n.HTTPAddr + "/health")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: node %d not ready after %v:\n%s", n.ID, c.opts.ReadyTimeout, tail(n.LogPath, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) signal(n *Node, sig syscall.Signal) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Logf("cluster: signal %v to node %d: %v", sig, n.ID, err)
	}
}

func (c *Cluster) kill(n *Node) {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return
	}
	c.signal(n, syscall.SIGCONT) // a stopped process must run to die promptly
	c.signal(n, syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM to node i, as an operator's restart does, and waits
// until the process has exited. A node that has not exited within timeout
// is killed and reported: a graceful stop must be prompt.
func (c *Cluster) Stop(i int, timeout time.Duration) error {
	n := c.Nodes[i]
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return nil
	}
	c.signal(n, syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		c.kill(n)
		return fmt.Errorf("cluster: node %d still running %v after SIGTERM:\n%s", n.ID, timeout, tail(n.LogPath, 20))
	}
}

// Kill sends SIGKILL to node i (0-based) and waits until it is gone.
func (c *Cluster) Kill(i int) { c.kill(c.Nodes[i]) }

// KillAll sends SIGKILL to every node in the given order, all before
// waiting for any, so that none runs on long after the first dies, and then
// waits until all are gone: a whole-ensemble power cut.
func (c *Cluster) KillAll(order []int) {
	for _, i := range order {
		c.signal(c.Nodes[i], syscall.SIGCONT) // a stopped process must run to die promptly
		c.signal(c.Nodes[i], syscall.SIGKILL)
	}
	for _, i := range order {
		c.kill(c.Nodes[i])
	}
}

// Running reports whether node i's process is alive (stopped counts).
func (c *Cluster) Running(i int) bool {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Pause stops node i with SIGSTOP: it neither answers nor sends, which to
// the rest of the ensemble and its clients looks like a partition.
func (c *Cluster) Pause(i int) { c.signal(c.Nodes[i], syscall.SIGSTOP) }

// Resume continues a paused node.
func (c *Cluster) Resume(i int) { c.signal(c.Nodes[i], syscall.SIGCONT) }

// Restart starts node i again with the same flags and data dir and waits
// until it is ready. The node must not be running. It returns an error
// rather than failing the test, so fault injectors running outside the
// test's goroutine can hand the failure back to it.
func (c *Cluster) Restart(i int) error {
	n := c.Nodes[i]
	if c.Running(i) {
		return fmt.Errorf("cluster: restart of node %d, which is running", n.ID)
	}
	if err := c.spawn(n); err != nil {
		return err
	}
	return c.waitReady(n)
}

// Wipe removes node i's data dir; the node must not be running.
func (c *Cluster) Wipe(i int) {
	c.t.Helper()
	if c.Running(i) {
		c.t.Fatalf("cluster: wipe of node %d, which is running", c.Nodes[i].ID)
	}
	if err := os.RemoveAll(c.Nodes[i].DataDir); err != nil {
		c.t.Fatal(err)
	}
}

// EtcdEndpoints returns every node's etcd address.
func (c *Cluster) EtcdEndpoints() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.EtcdAddr
	}
	return out
}

// ZKServers returns every node's ZooKeeper address.
func (c *Cluster) ZKServers() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.ZKAddr
	}
	return out
}

// freePorts returns n distinct loopback ports that were free a moment ago
// (see testenv.FreePorts).
func freePorts(t testing.TB, n int) []int { return testenv.FreePorts(t, n) }

// errorLines returns the ERROR records of a node's log, written by slog's
// JSON handler (the default) or its text one.
func errorLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, " level=ERROR ") {
			out = append(out, l)
		}
	}
	return out
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
