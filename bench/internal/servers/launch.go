package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Launcher knows where the servers' programs are and where their data goes.
type Launcher struct {
	// Dir is the parent of every data directory and log file; each
	// started system gets a fresh subdirectory.
	Dir string
	// JanusBin and EtcdBin are the server binaries.
	JanusBin, EtcdBin string
	// Java is the java launcher and ZKClasspath the jars a ZooKeeper
	// server needs (see ZKClasspath).
	Java        string
	ZKClasspath []string
	// ZKHeap is the JVM's -Xmx, e.g. "2g": large enough for the biggest
	// data set loaded, or ZooKeeper would be measured while thrashing.
	ZKHeap string
	// JanusArgs are extra flags for every Janus member.
	JanusArgs []string
	// CeilingBin runs the no-op servers as "CeilingBin ceiling ..."
	// (the bench binary itself); CeilingValueSize is the value their
	// reads return.
	CeilingBin       string
	CeilingValueSize int
	// StartTimeout bounds how long a system may take to serve.
	StartTimeout time.Duration
	Logger       *slog.Logger

	seq int
}

// Systems names the systems a Launcher can start. The ceiling is no real
// system: a no-op server for each wire that answers every request at
// once, measuring what the wire and the clients cost on this machine.
var Systems = []string{"janus", "etcd", "zookeeper", "ceiling"}

// Start starts system name with the given number of nodes and waits until
// it serves clients.
func (l *Launcher) Start(ctx context.Context, name string, nodes int) (*System, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("start %s: need at least one node, got %d", name, nodes)
	}
	timeout := l.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	const attempts = 3
	var lastErr error
	for range attempts {
		l.seq++
		root := filepath.Join(l.Dir, fmt.Sprintf("%s-%d", name, l.seq))
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		var (
			s   *System
			err error
		)
		switch name {
		case "janus":
			s, err = l.startJanus(root, nodes)
		case "etcd":
			s, err = l.startEtcd(root, nodes)
		case "zookeeper":
			s, err = l.startZooKeeper(root, nodes)
		case "ceiling":
			s, err = l.startCeiling(root)
		default:
			return nil, fmt.Errorf("unknown system %q (want one of %v)", name, Systems)
		}
		if err != nil {
			if s != nil {
				s.Stop()
			}
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err = waitReady(wctx, s, readiness(s))
		cancel()
		if err == nil {
			if l.Logger != nil {
				l.Logger.Info("started", "system", name, "nodes", nodes, "etcd", s.EtcdEndpoints, "zookeeper", s.ZKServers, "dir", root)
			}
			return s, nil
		}
		s.Stop()
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, fmt.Errorf("start %s: %w", name, lastErr)
}

// readiness returns the check that says s serves: etcd's /health for etcd,
// ruok (and, for an ensemble, a mode in srvr) for ZooKeeper, and for Janus
// every member's client ports open and its /health saying true, which a
// member says only once it knows a leader and can read its state.
func readiness(s *System) func(context.Context) bool {
	return func(ctx context.Context) bool {
		switch s.Name {
		case "etcd":
			for _, ep := range s.EtcdEndpoints {
				if !etcdHealthy(ctx, ep) {
					return false
				}
			}
			return true
		case "zookeeper":
			for _, a := range s.ZKServers {
				if out, err := FourLetterWord(ctx, a, "ruok"); err != nil || out != "imok" {
					return false
				}
			}
			// An ensemble answers ruok before it has a leader.
			if len(s.ZKServers) > 1 {
				for _, a := range s.ZKServers {
					out, err := FourLetterWord(ctx, a, "srvr")
					if err != nil || !strings.Contains(out, "Mode: ") || strings.Contains(out, "not currently serving") {
						return false
					}
				}
			}
			return true
		default:
			var addrs []string
			for _, ep := range s.EtcdEndpoints {
				addrs = append(addrs, strings.TrimPrefix(ep, "http://"))
			}
			if !tcpOpen(ctx, append(addrs, s.ZKServers...)...) {
				return false
			}
			for _, u := range s.HTTPURLs {
				if !etcdHealthy(ctx, u) {
					return false
				}
			}
			return true
		}
	}
}

// startCeiling starts one no-op server process for both wires, whatever
// the number of nodes asked for: there is nothing to replicate.
func (l *Launcher) startCeiling(root string) (*System, error) {
	if l.CeilingBin == "" {
		return nil, errors.New("no ceiling binary")
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	etcdAddr, zkAddr := hostPort(ports[0]), hostPort(ports[1])
	size := l.CeilingValueSize
	if size == 0 {
		size = 256
	}
	cmd := exec.Command(l.CeilingBin, "ceiling", "--etcd-listen", etcdAddr, "--zk-listen", zkAddr, "--value-size", strconv.Itoa(size))
	cmd.Dir = root
	s := &System{Name: "ceiling", EtcdEndpoints: []string{"http://" + etcdAddr}, ZKServers: []string{zkAddr}}
	p, err := startProc("ceiling", cmd, filepath.Join(root, "ceiling.log"))
	if err != nil {
		return s, err
	}
	s.procs = append(s.procs, p)
	return s, nil
}

func (l *Launcher) startJanus(root string, nodes int) (*System, error) {
	if l.JanusBin == "" {
		return nil, errors.New("no Janus binary")
	}
	ports, err := freePorts(4 * nodes)
	if err != nil {
		return nil, err
	}
	s := &System{Name: "janus"}
	// Member i+1 listens on ports[4i] (etcd), ports[4i+1] (ZooKeeper),
	// ports[4i+2] (HTTP) and ports[4i+3] (peers), as deploy/local-cluster.sh
	// lays them out.
	var peers, peerEtcd, peerZK []string
	for i := range nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, hostPort(ports[4*i+3])))
		peerEtcd = append(peerEtcd, fmt.Sprintf("%d=%s", i+1, hostPort(ports[4*i])))
		peerZK = append(peerZK, fmt.Sprintf("%d=%s", i+1, hostPort(ports[4*i+1])))
	}
	for i := range nodes {
		dataDir := filepath.Join(root, fmt.Sprintf("node%d", i+1))
		etcdAddr, zkAddr, httpAddr := hostPort(ports[4*i]), hostPort(ports[4*i+1]), hostPort(ports[4*i+2])
		args := []string{
			"--data-dir", dataDir,
			"--etcd-listen", etcdAddr,
			"--zk-listen", zkAddr,
			"--http-listen", httpAddr,
			"--log-level", "warn",
			// The comparison's -profile reads each member's pprof.
			"--enable-pprof",
		}
		if nodes > 1 {
			args = append(args, "--id", strconv.Itoa(i+1), "--peers", strings.Join(peers, ","),
				"--peer-etcd", strings.Join(peerEtcd, ","), "--peer-zk", strings.Join(peerZK, ","))
		}
		args = append(args, l.JanusArgs...)
		cmd := exec.Command(l.JanusBin, args...)
		cmd.Dir = root
		p, err := startProc(fmt.Sprintf("janus %d", i+1), cmd, filepath.Join(root, fmt.Sprintf("janus%d.log", i+1)))
		if err != nil {
			return s, err
		}
		s.procs = append(s.procs, p)
		s.DataDirs = append(s.DataDirs, dataDir)
		s.EtcdEndpoints = append(s.EtcdEndpoints, "http://"+etcdAddr)
		s.ZKServers = append(s.ZKServers, zkAddr)
		s.HTTPURLs = append(s.HTTPURLs, "http://"+httpAddr)
	}
	return s, nil
}

func (l *Launcher) startEtcd(root string, nodes int) (*System, error) {
	if l.EtcdBin == "" {
		return nil, errors.New("no etcd binary")
	}
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return nil, err
	}
	var cluster []string
	for i := range nodes {
		cluster = append(cluster, fmt.Sprintf("e%d=http://%s", i+1, hostPort(ports[2*i+1])))
	}
	s := &System{Name: "etcd"}
	for i := range nodes {
		name := fmt.Sprintf("e%d", i+1)
		client, peer := "http://"+hostPort(ports[2*i]), "http://"+hostPort(ports[2*i+1])
		dataDir := filepath.Join(root, name)
		cmd := exec.Command(l.EtcdBin,
			"--name", name,
			"--data-dir", dataDir,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(cluster, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", filepath.Base(root),
			"--log-level", "warn",
		)
		cmd.Dir = root
		p, err := startProc("etcd "+name, cmd, filepath.Join(root, name+".log"))
		if err != nil {
			return s, err
		}
		s.procs = append(s.procs, p)
		s.DataDirs = append(s.DataDirs, dataDir)
		s.EtcdEndpoints = append(s.EtcdEndpoints, client)
	}
	return s, nil
}

// zkLog4j sends ZooKeeper's log, warnings only, to stdout, which the
// launcher keeps in a file.
const zkLog4j = `log4j.rootLogger=WARN, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
`

// startZooKeeper runs QuorumPeerMain directly: Debian's start scripts put
// no log4j binding on the classpath.
func (l *Launcher) startZooKeeper(root string, nodes int) (*System, error) {
	if l.Java == "" || len(l.ZKClasspath) == 0 {
		return nil, errors.New("no java or ZooKeeper jars")
	}
	ports, err := freePorts(3 * nodes)
	if err != nil {
		return nil, err
	}
	var quorum []string
	if nodes > 1 {
		for i := range nodes {
			quorum = append(quorum, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2]))
		}
	}
	heap := l.ZKHeap
	if heap == "" {
		heap = "1g"
	}
	s := &System{Name: "zookeeper"}
	for i := range nodes {
		dir := filepath.Join(root, fmt.Sprintf("zk%d", i+1))
		confDir, dataDir := filepath.Join(dir, "conf"), filepath.Join(dir, "data")
		for _, d := range []string{confDir, dataDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return s, err
			}
		}
		cfg := map[string]string{
			"tickTime":               "2000",
			"dataDir":                dataDir,
			"clientPort":             strconv.Itoa(ports[3*i]),
			"clientPortAddress":      "127.0.0.1",
			"maxClientCnxns":         "0",
			"4lw.commands.whitelist": "*",
			"admin.enableServer":     "false",
		}
		if nodes > 1 {
			cfg["initLimit"], cfg["syncLimit"] = "10", "5"
			if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
				return s, err
			}
		}
		cfgPath := filepath.Join(confDir, "zoo.cfg")
		if err := os.WriteFile(cfgPath, []byte(renderZooCfg(cfg, quorum)), 0o644); err != nil {
			return s, err
		}
		if err := os.WriteFile(filepath.Join(confDir, "log4j.properties"), []byte(zkLog4j), 0o644); err != nil {
			return s, err
		}
		cmd := exec.Command(l.Java,
			"-Xmx"+heap,
			"-Djava.net.preferIPv4Stack=true",
			"-Dzookeeper.admin.enableServer=false",
			"-Dzookeeper.4lw.commands.whitelist=*",
			"-cp", strings.Join(append([]string{confDir}, l.ZKClasspath...), ":"),
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
		cmd.Dir = dir
		p, err := startProc(fmt.Sprintf("zookeeper %d", i+1), cmd, filepath.Join(dir, "zookeeper.log"))
		if err != nil {
			return s, err
		}
		s.procs = append(s.procs, p)
		s.DataDirs = append(s.DataDirs, dataDir)
		s.ZKServers = append(s.ZKServers, hostPort(ports[3*i]))
	}
	return s, nil
}

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

// ZKClasspath returns the jars a ZooKeeper 3.8 server needs from Debian's
// zookeeper package, with the log4j binding Debian's scripts leave out.
func ZKClasspath(javaShare string) ([]string, error) {
	var out []string
	for _, jar := range []string{"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-log4j12.jar", "log4j-1.2.jar"} {
		p := filepath.Join(javaShare, jar)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("ZooKeeper jar %s (install Debian's zookeeper package): %w", jar, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// FourLetterWord sends a ZooKeeper four-letter command to addr and returns
// the answer.
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s to %s: %w", cmd, addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", fmt.Errorf("%s to %s: %w", cmd, addr, err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return string(out), fmt.Errorf("%s to %s: %w", cmd, addr, err)
	}
	return string(out), nil
}

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
