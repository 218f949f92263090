package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// javaShareDir is where Debian's Java packages put their jars.
const javaShareDir = "/usr/share/java"

// ZKOptions configures a reference ZooKeeper. The zero value is the setup
// the notes describe: tickTime 2s, extended types (TTL nodes) on, containers
// and TTL nodes reaped every second, every four-letter word allowed, and no
// admin server.
type ZKOptions struct {
	// TickTime is ZooKeeper's basic time unit; session timeouts are clamped
	// to [2, 20] ticks. Zero means 2s.
	TickTime time.Duration
	// DisableExtendedTypes turns TTL nodes off (they are on by default).
	DisableExtendedTypes bool
	// ContainerCheckInterval is how often empty containers and expired TTL
	// nodes are deleted. Zero means 1s.
	ContainerCheckInterval time.Duration
	// Config adds or overrides zoo.cfg entries.
	Config map[string]string
	// JVMFlags are added to the java command line, after the defaults.
	JVMFlags []string
	// StartTimeout bounds how long to wait for the server (or the whole
	// ensemble) to serve. Zero means 2 minutes: JVMs start slowly on a busy
	// machine.
	StartTimeout time.Duration
}

func (o ZKOptions) withDefaults() ZKOptions {
	if o.TickTime == 0 {
		o.TickTime = 2 * time.Second
	}
	if o.ContainerCheckInterval == 0 {
		o.ContainerCheckInterval = time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	return o
}

// ZooKeeper is one running reference ZooKeeper server.
type ZooKeeper struct {
	// Addr is the client address, host:port on loopback.
	Addr string
	// ID is the server's myid in an ensemble, 0 when standalone.
	ID int
	// DataDir holds its snapshots and transaction logs.
	DataDir string

	proc *process
}

// Stop kills the server at once, as a crash would. Cleanup calls it too;
// calling it early lets a test watch clients and peers react.
func (z *ZooKeeper) Stop() { z.proc.stop() }

// Log returns what the server has logged so far.
func (z *ZooKeeper) Log() string { return z.proc.log() }

// ZooKeeperEnsemble is a running quorum of reference ZooKeeper servers.
type ZooKeeperEnsemble struct {
	Servers []*ZooKeeper
}

// Addrs returns the client addresses of all servers, in myid order.
func (e *ZooKeeperEnsemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// Leader returns the server that currently reports itself leader.
func (e *ZooKeeperEnsemble) Leader(ctx context.Context) (*ZooKeeper, error) {
	for _, s := range e.Servers {
		out, err := FourLetterWord(ctx, s.Addr, "srvr")
		if err == nil && zkMode(out) == "leader" {
			return s, nil
		}
	}
	return nil, errors.New("no server reports Mode: leader")
}

// StartZooKeeper starts a standalone reference ZooKeeper and waits until it
// answers ruok with imok.
func StartZooKeeper(t testing.TB, opts ZKOptions) *ZooKeeper {
	t.Helper()
	opts = opts.withDefaults()
	cp := zkServerClasspath(t)
	const attempts = 3
	var lastErr error
	for range attempts {
		zk, err := startZooKeeperOnce(t, cp, opts)
		if err == nil {
			return zk
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("testenv: start ZooKeeper: %v", lastErr)
	return nil
}

// StartZooKeeperEnsemble starts n reference ZooKeeper servers (3 is the
// usual) with default options as one quorum, and waits until one of them
// leads and all others follow.
func StartZooKeeperEnsemble(t testing.TB, n int) *ZooKeeperEnsemble {
	t.Helper()
	return StartZooKeeperEnsembleWith(t, n, ZKOptions{})
}

// StartZooKeeperEnsembleWith is StartZooKeeperEnsemble with options.
func StartZooKeeperEnsembleWith(t testing.TB, n int, opts ZKOptions) *ZooKeeperEnsemble {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: an ensemble needs at least one server, got %d", n)
	}
	opts = opts.withDefaults()
	cp := zkServerClasspath(t)
	const attempts = 3
	var lastErr error
	for range attempts {
		e, err := startEnsembleOnce(t, cp, n, opts)
		if err == nil {
			return e
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("testenv: start ZooKeeper ensemble of %d: %v", n, lastErr)
	return nil
}

// errPortTaken means another process bound a port between freePorts and the
// server's bind; starting again with new ports fixes it.
var errPortTaken = errors.New("port taken by another process")

func startZooKeeperOnce(t testing.TB, cp []string, opts ZKOptions) (*ZooKeeper, error) {
	t.Helper()
	port := freePorts(t, 1)[0]
	zk, err := launchZooKeeper(t, cp, opts, 0, port, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(t.Context(), opts.StartTimeout)
	defer cancel()
	err = waitZK(ctx, []*ZooKeeper{zk}, func(outs []string) bool { return zkMode(outs[0]) == "standalone" })
	if err != nil {
		zk.Stop()
		return nil, err
	}
	return zk, nil
}

func startEnsembleOnce(t testing.TB, cp []string, n int, opts ZKOptions) (*ZooKeeperEnsemble, error) {
	t.Helper()
	ports := freePorts(t, 3*n)
	var quorum []string
	for i := range n {
		quorum = append(quorum, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2]))
	}
	e := &ZooKeeperEnsemble{}
	for i := range n {
		zk, err := launchZooKeeper(t, cp, opts, i+1, ports[3*i], quorum)
		if err != nil {
			for _, s := range e.Servers {
				s.Stop()
			}
			return nil, err
		}
		e.Servers = append(e.Servers, zk)
	}
	ctx, cancel := context.WithTimeout(t.Context(), opts.StartTimeout)
	defer cancel()
	err := waitZK(ctx, e.Servers, func(outs []string) bool {
		leaders := 0
		for _, out := range outs {
			switch zkMode(out) {
			case "leader":
				leaders++
			case "follower":
			default:
				return false
			}
		}
		return leaders == 1
	})
	if err != nil {
		for _, s := range e.Servers {
			s.Stop()
		}
		return nil, err
	}
	return e, nil
}

// launchZooKeeper writes a conf dir and starts QuorumPeerMain directly:
// Debian's scripts put no log4j binding on the classpath, so the server would
// log nothing.
func launchZooKeeper(t testing.TB, cp []string, opts ZKOptions, id, clientPort int, quorum []string) (*ZooKeeper, error) {
	t.Helper()
	root := t.TempDir()
	confDir := filepath.Join(root, "conf")
	dataDir := filepath.Join(root, "data")
	for _, d := range []string{confDir, dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	cfg := map[string]string{
		"tickTime":               strconv.FormatInt(opts.TickTime.Milliseconds(), 10),
		"dataDir":                dataDir,
		"clientPort":             strconv.Itoa(clientPort),
		"clientPortAddress":      "127.0.0.1",
		"maxClientCnxns":         "0",
		"4lw.commands.whitelist": "*",
		"admin.enableServer":     "false",
		"extendedTypesEnabled":   strconv.FormatBool(!opts.DisableExtendedTypes),
	}
	if len(quorum) > 0 {
		cfg["initLimit"] = "10"
		cfg["syncLimit"] = "5"
		if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("write myid: %w", err)
		}
	}
	for k, v := range opts.Config {
		cfg[k] = v
	}
	cfgPath := filepath.Join(confDir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(renderZooCfg(cfg, quorum)), 0o644); err != nil {
		return nil, fmt.Errorf("write zoo.cfg: %w", err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "log4j.properties"), []byte(zkLog4jProperties), 0o644); err != nil {
		return nil, fmt.Errorf("write log4j.properties: %w", err)
	}

	args := []string{
		"-Xmx256m",
		"-Djava.net.preferIPv4Stack=true",
		"-Dznode.container.checkIntervalMs=" + strconv.FormatInt(opts.ContainerCheckInterval.Milliseconds(), 10),
		// Set as properties too: some are read as system properties only,
		// and zoo.cfg copies unknown keys there only while parsing.
		"-Dzookeeper.extendedTypesEnabled=" + cfg["extendedTypesEnabled"],
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.4lw.commands.whitelist=*",
	}
	args = append(args, opts.JVMFlags...)
	args = append(args, "-cp", strings.Join(append([]string{confDir}, cp...), ":"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
	cmd := exec.Command(javaPath(t), args...)
	cmd.Dir = root
	name := "zookeeper"
	if id > 0 {
		name = fmt.Sprintf("zookeeper %d", id)
	}
	proc, err := startProcess(t, name, cmd, filepath.Join(root, "zookeeper.log"))
	if err != nil {
		return nil, err
	}
	return &ZooKeeper{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort)), ID: id, DataDir: dataDir, proc: proc}, nil
}

// zkLog4jProperties sends the server's log to stdout, which startProcess
// keeps in a file and prints when a test fails.
const zkLog4jProperties = `log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
`

func renderZooCfg(cfg map[string]string, quorum []string) string {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, cfg[k])
	}
	for _, line := range quorum {
		b.WriteString(line + "\n")
	}
	return b.String()
}

// waitZK polls srvr on every server until ready accepts their answers, a
// server dies, or ctx ends.
func waitZK(ctx context.Context, servers []*ZooKeeper, ready func(srvrOutputs []string) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, s := range servers {
			if done, err := s.proc.exited(); done {
				log := s.Log()
				if strings.Contains(log, "Address already in use") {
					return fmt.Errorf("%s exited: %w", s.proc.name, errPortTaken)
				}
				return fmt.Errorf("%s exited before serving (%v); log:\n%s", s.proc.name, err, tail(log, 60))
			}
		}
		outs := make([]string, len(servers))
		allOK := true
		for i, s := range servers {
			ruok, err := FourLetterWord(ctx, s.Addr, "ruok")
			if err != nil || ruok != "imok" {
				allOK = false
				break
			}
			if outs[i], err = FourLetterWord(ctx, s.Addr, "srvr"); err != nil {
				allOK = false
				break
			}
		}
		if allOK && ready(outs) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving after waiting: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// zkMode extracts the "Mode:" line of a srvr answer: standalone, leader,
// follower or observer; empty if absent (the server is not serving yet).
func zkMode(srvr string) string {
	for line := range strings.SplitSeq(srvr, "\n") {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			return strings.TrimSpace(mode)
		}
	}
	return ""
}

// FourLetterWord sends a ZooKeeper four-letter command (ruok, srvr, mntr,
// ...) to addr and returns the whole answer.
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("four-letter word %s to %s: %w", cmd, addr, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("four-letter word %s to %s: %w", cmd, addr, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return string(out), fmt.Errorf("four-letter word %s to %s: %w", cmd, addr, err)
	}
	return string(out), nil
}

// zkServerClasspath lists the jars a ZooKeeper server needs, with the log4j
// binding Debian's own scripts leave out. zookeeper.jar's manifest names the
// rest of its runtime dependencies.
func zkServerClasspath(t testing.TB) []string {
	t.Helper()
	return jars(t, []jarNeed{
		{"zookeeper.jar", "zookeeper"},
		{"zookeeper-jute.jar", "zookeeper"},
		{"slf4j-api.jar", "slf4j"},
		{"slf4j-log4j12.jar", "slf4j"},
		{"log4j-1.2.jar", "log4j"},
	})
}

type jarNeed struct {
	file string // in javaShareDir
	what string // for Need
}

func jars(t testing.TB, needs []jarNeed) []string {
	t.Helper()
	paths := make([]string, 0, len(needs))
	for _, n := range needs {
		p := filepath.Join(javaShareDir, n.file)
		_, err := os.Stat(p)
		Need(t, n.what, err == nil, fmt.Sprintf("jar %s: %v", p, err))
		paths = append(paths, p)
	}
	return paths
}

// javaPath returns the java launcher.
func javaPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("java")
	Need(t, "java", err == nil, fmt.Sprintf("java not on PATH: %v", err))
	return p
}
