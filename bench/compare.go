package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/januskv/janus/bench/internal/load"
	"github.com/januskv/janus/bench/internal/report"
	"github.com/januskv/janus/bench/internal/servers"
)

// speaks says which systems serve each protocol. The ceiling (no-op
// servers for both wires) speaks both.
var speaks = map[string][]string{
	"etcd":      {"janus", "etcd", "ceiling"},
	"zookeeper": {"janus", "zookeeper", "ceiling"},
}

type compareConfig struct {
	opts      load.Options
	systems   []string
	workloads []string
	nodes     int
	rounds    int
	out       string
	workDir   string
	janusBin  string
	etcdBin   string
	javaShare string
	zkHeap    string
	memKeys   int
	memKeys1M bool
	memSettle time.Duration
	profile   bool
	// profileRounds profiles the measured rounds too, each into a file of
	// its own.
	profileRounds bool
	janusArgs     string
}

func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c compareConfig
	loadFlags(fs, &c.opts)
	systems := fs.String("systems", "janus,etcd,zookeeper,ceiling", "systems to start and compare, in the order they run each round (ceiling: no-op servers that answer every request at once, the wire's ceiling on this machine)")
	workloads := fs.String("workloads", "put,create,getData", "workloads to run (see bench list); each runs on the systems that speak its protocol")
	fs.IntVar(&c.nodes, "nodes", 1, "nodes per system (3 for a replicated comparison: every system starts an ensemble of that size on loopback)")
	fs.IntVar(&c.rounds, "rounds", 3, "measured rounds per workload and system, after one discarded warm-up round")
	fs.StringVar(&c.out, "out", "", "report directory (default bench/out/<time>, which git ignores)")
	fs.StringVar(&c.workDir, "work-dir", "", "where the servers keep their data and logs (default a new temporary directory, removed afterwards)")
	fs.StringVar(&c.janusBin, "janus-bin", "", "Janus binary (default: go build -o bin/janus . in the repository)")
	fs.StringVar(&c.etcdBin, "etcd-bin", "", "etcd binary (default bin/etcd in the repository, built from go.mod's tool block if missing)")
	fs.StringVar(&c.javaShare, "java-share", "/usr/share/java", "directory holding Debian's ZooKeeper, SLF4J and log4j jars")
	fs.StringVar(&c.zkHeap, "zk-heap", "2g", "ZooKeeper's JVM maximum heap (-Xmx)")
	fs.IntVar(&c.memKeys, "mem-keys", 100000, "keys of --value-size bytes to load into a fresh server of each system for the memory and disk figures; 0 skips them")
	fs.BoolVar(&c.memKeys1M, "mem-1m", false, "measure memory and disk after 1M keys instead of --mem-keys")
	fs.DurationVar(&c.memSettle, "mem-settle", 3*time.Second, "wait this long after the last key is loaded before reading RSS and disk (background compactions and GC settle)")
	fs.StringVar(&c.janusArgs, "janus-args", "", "extra flags for every Janus member, space-separated (e.g. \"--reaper-interval 1m\"), for diagnostic runs; the report records them")
	fs.BoolVar(&c.profile, "profile", false, "take a CPU profile of every Janus member (its /debug/pprof) during each workload's discarded warm-up round, into the report directory as profile-<workload>-janus<member>.pb.gz")
	fs.BoolVar(&c.profileRounds, "profile-rounds", false, "with --profile, profile every measured round too, as profile-<workload>-janus<member>-r<round>.pb.gz: the profile of a slow round says what made it slow, at the cost of the profiler's own (a few percent) in the measured figures")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c.systems = splitList(*systems)
	c.workloads = splitList(*workloads)
	for _, w := range c.workloads {
		if _, err := protocolOf(w); err != nil {
			return err
		}
	}
	if c.memKeys1M {
		c.memKeys = 1_000_000
	}
	if c.rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}
	if c.out == "" {
		c.out = filepath.Join("bench", "out", time.Now().Format("20060102-150405"))
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		c.opts.Progress = stderr
	}

	startLoad := loadAvg()
	rep, err := compare(ctx, c, logger)
	if err != nil {
		return err
	}
	rep.LoadAvg = []string{startLoad, loadAvg()}
	rep.Command = "go run ./bench compare " + shellJoin(args)
	if err := rep.Write(c.out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report written to %s\n", filepath.Join(c.out, "report.md"))
	return nil
}

func compare(ctx context.Context, c compareConfig, logger *slog.Logger) (*report.Report, error) {
	rep := &report.Report{
		Title:    fmt.Sprintf("Janus compared, %d node(s)", c.nodes),
		Started:  time.Now(),
		Machine:  machine(),
		Revision: revision(ctx),
		Nodes:    c.nodes,
		Settings: []string{
			fmt.Sprintf("--clients=%d", c.opts.Clients), fmt.Sprintf("--conns=%d", c.opts.Conns),
			fmt.Sprintf("--key-size=%d", c.opts.KeySize), fmt.Sprintf("--value-size=%d", c.opts.ValueSize),
			fmt.Sprintf("--key-space=%d", c.opts.KeySpace), fmt.Sprintf("--ops=%d", c.opts.Ops),
			fmt.Sprintf("--duration=%s", c.opts.Duration), fmt.Sprintf("--rate=%g", c.opts.Rate),
			fmt.Sprintf("--rounds=%d", c.rounds),
		},
	}
	if c.memKeys > 0 {
		rep.Settings = append(rep.Settings, fmt.Sprintf("--mem-settle=%s", c.memSettle))
	}
	workDir := c.workDir
	if workDir == "" {
		d, err := os.MkdirTemp("", "janus-bench-")
		if err != nil {
			return nil, fmt.Errorf("work dir: %w", err)
		}
		defer os.RemoveAll(d)
		workDir = d
	} else {
		// Each server runs in a directory of its own under workDir
		// and is given paths under it.
		d, err := filepath.Abs(workDir)
		if err != nil {
			return nil, fmt.Errorf("work dir: %w", err)
		}
		workDir = d
	}
	l := &servers.Launcher{Dir: workDir, ZKHeap: c.zkHeap, Logger: logger, JanusArgs: strings.Fields(c.janusArgs), CeilingValueSize: c.opts.ValueSize}
	if len(l.JanusArgs) > 0 {
		rep.Settings = append(rep.Settings, fmt.Sprintf("--janus-args=%q", c.janusArgs))
	}
	var ready []string
	for _, s := range c.systems {
		if err := prepare(ctx, l, s, c); err != nil {
			logger.Warn("system left out", "system", s, "err", err)
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s left out: %v", s, firstLine(err)))
			continue
		}
		ready = append(ready, s)
	}
	rep.Systems = ready
	if len(ready) == 0 {
		return nil, errors.New("no system could be prepared")
	}

	if len(c.workloads) > 0 {
		if err := runRounds(ctx, l, c, ready, rep, logger); err != nil {
			return nil, err
		}
	}
	if c.memKeys > 0 {
		for _, s := range ready {
			if s == "ceiling" {
				continue // it stores nothing
			}
			m := measureMemory(ctx, l, s, c, logger)
			rep.Memory = append(rep.Memory, m)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	return rep, nil
}

// runRounds starts every ready system once, then runs each workload as one
// warm-up round and c.rounds measured rounds, visiting the systems in the
// same order each round (A B A B ...), so slow drift of the machine's load
// hits all of them alike. Idle systems stay up between their turns: they
// use next to no CPU, and restarting would throw away the JVM's warm-up.
func runRounds(ctx context.Context, l *servers.Launcher, c compareConfig, ready []string, rep *report.Report, logger *slog.Logger) error {
	running := map[string]*servers.System{}
	defer func() {
		for name, s := range running {
			s.Stop()
			logger.Info("stopped", "system", name)
		}
	}()
	for _, name := range ready {
		s, err := l.Start(ctx, name, c.nodes)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logger.Warn("system did not start", "system", name, "err", err)
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s did not start: %v", name, firstLine(err)))
			continue
		}
		running[name] = s
	}
	for _, wname := range c.workloads {
		proto, _ := protocolOf(wname)
		wl := report.Workload{Name: wname, Protocol: proto, Runs: map[string][]*load.Result{}, Warmup: map[string]*load.Result{}}
		for round := 0; round <= c.rounds; round++ {
			for _, name := range ready {
				s, ok := running[name]
				if !ok || !contains(speaks[proto], name) {
					continue
				}
				opts := c.opts
				opts.Prefix = fmt.Sprintf("/bench/%s-r%d", wname, round)
				var profiled func()
				if c.profile && (round == 0 || c.profileRounds) && len(s.HTTPURLs) > 0 {
					profiled = profileMembers(ctx, s, wname, round, c, rep, logger)
				}
				res, err := runOnce(ctx, s, proto, wname, opts, logger)
				if profiled != nil {
					profiled()
				}
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					logger.Warn("run failed", "workload", wname, "system", name, "round", round, "err", err)
					rep.Notes = append(rep.Notes, fmt.Sprintf("%s on %s, round %d, failed: %v", wname, name, round, firstLine(err)))
					continue
				}
				res.Target = name
				logger.Info("round done", "workload", wname, "system", name, "round", round, "warmup", round == 0,
					"ops_per_s", int(res.Ops.Throughput), "p99", res.Ops.Latency.P99, "errors", res.Errors,
					"server_cpu_us_per_op", microsPerOp(res.ServerCPU), "client_cpu_us_per_op", microsPerOp(res.ClientCPU))
				if round == 0 {
					wl.Warmup[name] = res
				} else {
					wl.Runs[name] = append(wl.Runs[name], res)
				}
			}
		}
		rep.Workloads = append(rep.Workloads, wl)
	}
	return nil
}

// profileMembers starts a CPU profile of each member of s over its HTTP
// port for about the length of one round, and returns a function that
// waits for them and writes them into the report directory. Unless
// --profile-rounds asks for every round, the profiles are taken in the
// warm-up round, which is not counted, so the profiler's own cost does not
// touch the measured rounds.
func profileMembers(ctx context.Context, s *servers.System, workload string, round int, c compareConfig, rep *report.Report, logger *slog.Logger) func() {
	secs := int(c.opts.Duration.Seconds())
	if c.opts.Ops > 0 || secs < 1 {
		secs = 5
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		logger.Warn("no profiles", "err", err)
		return nil
	}
	suffix := ""
	if round > 0 {
		suffix = fmt.Sprintf("-r%d", round)
	}
	var wg sync.WaitGroup
	for i, u := range s.HTTPURLs {
		name := fmt.Sprintf("profile-%s-%s%d%s.pb.gz", workload, s.Name, i+1, suffix)
		wg.Go(func() {
			if err := fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", u, secs), filepath.Join(c.out, name)); err != nil {
				logger.Warn("profile failed", "workload", workload, "member", i+1, "round", round, "err", err)
				return
			}
			logger.Info("profile written", "file", name)
		})
	}
	return func() {
		wg.Wait()
		switch round {
		case 0:
			rep.Notes = append(rep.Notes, fmt.Sprintf("CPU profiles of the Janus members during the %s warm-up round: profile-%s-%s*.pb.gz (go tool pprof -top bin/janus FILE)", workload, workload, s.Name))
		case 1:
			rep.Notes = append(rep.Notes, fmt.Sprintf("CPU profiles of the Janus members during each measured %s round, whose figures include the profiler's cost: profile-%s-%s*-r<round>.pb.gz", workload, workload, s.Name))
		}
	}
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// runOnce prepares workload against s and runs it. Besides the CPU time the
// load generator spent (which load.Run reads), it reads the CPU time s's
// server processes spent over the same span: the operations only, not the
// workload's connecting and preloading. A failure to read that leaves the
// result without a server CPU figure and is logged.
func runOnce(ctx context.Context, s *servers.System, proto, workload string, opts load.Options, logger *slog.Logger) (*load.Result, error) {
	var (
		w   load.Workload
		err error
	)
	if proto == "etcd" {
		w, err = load.NewEtcd(ctx, workload, s.EtcdEndpoints, opts)
	} else {
		w, err = load.NewZK(ctx, workload, s.ZKServers, opts)
	}
	if err != nil {
		return nil, err
	}
	defer w.Close()
	before, cpuErr := s.CPU()
	res, err := load.Run(ctx, workload, w, opts)
	if err != nil {
		return nil, err
	}
	var after time.Duration
	if cpuErr == nil {
		after, cpuErr = s.CPU()
	}
	if cpuErr != nil {
		logger.Warn("no server CPU figure", "workload", workload, "system", s.Name, "err", cpuErr)
	} else {
		res.ServerCPU = load.NewCPU(after-before, res.Ops.Count)
	}
	return res, nil
}

// measureMemory starts a fresh server, loads c.memKeys distinct keys
// through the system's own protocol (etcd for Janus), and reads its RSS and
// data directory size.
func measureMemory(ctx context.Context, l *servers.Launcher, name string, c compareConfig, logger *slog.Logger) report.Memory {
	m := report.Memory{System: name, Keys: c.memKeys, ValueSize: c.opts.ValueSize}
	s, err := l.Start(ctx, name, c.nodes)
	if err != nil {
		m.Error = firstLine(err)
		return m
	}
	defer s.Stop()
	opts := load.Options{
		Clients: 64, Conns: 8, KeySize: c.opts.KeySize, ValueSize: c.opts.ValueSize,
		Ops: int64(c.memKeys), Prefix: "/mem",
	}
	workload := "put-seq"
	if name == "zookeeper" {
		workload = "create"
	}
	proto, _ := protocolOf(workload)
	started := time.Now()
	res, err := runOnce(ctx, s, proto, workload, opts, logger)
	m.LoadTime = time.Since(started)
	if err != nil {
		m.Error = firstLine(err)
		return m
	}
	if res.Errors > 0 {
		m.Error = fmt.Sprintf("%d load errors, first: %s", res.Errors, res.FirstErrors[0])
	}
	// Let background flushes and compactions that the load triggered
	// settle, so the figures describe the data, not a transient.
	select {
	case <-ctx.Done():
		return m
	case <-time.After(c.memSettle):
	}
	if m.RSS, err = s.RSS(); err != nil {
		m.Error = firstLine(err)
	}
	if m.Disk, m.Apparent, err = s.Disk(); err != nil {
		m.Error = firstLine(err)
	}
	logger.Info("memory measured", "system", name, "keys", c.memKeys, "rss_mib", m.RSS>>20, "disk_mib", m.Disk>>20)
	return m
}

// prepare finds or builds what system name needs before it can start.
func prepare(ctx context.Context, l *servers.Launcher, name string, c compareConfig) error {
	switch name {
	case "janus":
		if c.janusBin != "" {
			// The servers run in their own directories: a relative
			// path would name nothing there.
			bin, err := filepath.Abs(c.janusBin)
			l.JanusBin = bin
			return err
		}
		root, err := repoRoot(ctx)
		if err != nil {
			return err
		}
		bin := filepath.Join(root, "bin", "janus")
		if err := goBuild(ctx, root, bin, "."); err != nil {
			return err
		}
		l.JanusBin = bin
	case "etcd":
		if c.etcdBin != "" {
			bin, err := filepath.Abs(c.etcdBin)
			l.EtcdBin = bin
			return err
		}
		root, err := repoRoot(ctx)
		if err != nil {
			return err
		}
		bin := filepath.Join(root, "bin", "etcd")
		if _, err := os.Stat(bin); err != nil {
			if err := goBuild(ctx, root, bin, "go.etcd.io/etcd/server/v3"); err != nil {
				return err
			}
		}
		l.EtcdBin = bin
	case "zookeeper":
		java, err := exec.LookPath("java")
		if err != nil {
			return fmt.Errorf("java not on PATH (install Debian's zookeeper package): %w", err)
		}
		share, err := filepath.Abs(c.javaShare)
		if err != nil {
			return err
		}
		cp, err := servers.ZKClasspath(share)
		if err != nil {
			return err
		}
		l.Java, l.ZKClasspath = java, cp
	case "ceiling":
		// The no-op servers are this program's own ceiling command.
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("locate the bench binary for the ceiling: %w", err)
		}
		l.CeilingBin = bin
	default:
		return fmt.Errorf("unknown system %q (want one of %v)", name, servers.Systems)
	}
	return nil
}

// goBuild builds pkg into bin beside its final name and renames it, so a
// concurrent user of bin never runs a half-written file.
func goBuild(ctx context.Context, root, bin, pkg string) error {
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	defer os.Remove(tmp)
	// -trimpath keeps the build machine's directories out of the binary,
	// and so out of the CPU profiles a report directory keeps.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(out)))
	}
	return os.Rename(tmp, bin)
}

func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locate go.mod: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("locate go.mod: run bench from inside the Janus repository")
	}
	return filepath.Dir(gomod), nil
}

// machine describes the host for the report.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = " " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d CPUs (%s), %s/%s%s, %s", runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, kernel, runtime.Version())
}

// loadAvg returns the machine's 1, 5 and 15 minute load averages, as
// /proc/loadavg gives them, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// microsPerOp is c's CPU per operation in whole microseconds, for logs;
// -1 if c was not measured.
func microsPerOp(c *load.CPU) int {
	if c == nil {
		return -1
	}
	return int(c.MicrosPerOp + 0.5)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// revision names the source tree measured: the commit, and "+dirty" when
// the work tree differs from it (the Janus binary is built from the tree).
func revision(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// shellJoin joins args into a command line a shell reads back as the same
// arguments: empty ones and ones with spaces or quotes are single-quoted.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?;&|<>(){}[]#~!") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
