// Package servers starts, measures and stops the systems the benchmark
// compares: Janus, a real etcd and a real ZooKeeper, each as child
// processes in process groups of their own, on free loopback ports, with
// their data under a directory the caller chooses.
//
// Only what a Launcher started is ever stopped: Stop signals the process
// groups it created, by id, and nothing else.
package servers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// System is one running system under test: one or more nodes.
type System struct {
	// Name is janus, etcd or zookeeper.
	Name string
	// EtcdEndpoints are the etcd v3 client URLs; empty if the system has
	// no etcd face.
	EtcdEndpoints []string
	// ZKServers are the ZooKeeper client addresses; empty if the system
	// has no ZooKeeper face.
	ZKServers []string
	// HTTPURLs are the nodes' HTTP addresses (/health, /debug/pprof) for
	// Janus; empty for the others.
	HTTPURLs []string
	// DataDirs holds each node's data directory.
	DataDirs []string

	procs []*proc
}

// Stop ends every node of the system: SIGTERM to each process group, then
// SIGKILL to whatever is still there after a grace period.
func (s *System) Stop() {
	var wg sync.WaitGroup
	for _, p := range s.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(10 * time.Second)
		}()
	}
	wg.Wait()
}

// RSS returns the resident set size summed over the system's node
// processes, from VmRSS in /proc/<pid>/status.
func (s *System) RSS() (int64, error) {
	var total int64
	for _, p := range s.procs {
		n, err := vmRSS(p.cmd.Process.Pid)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.name, err)
		}
		total += n
	}
	return total, nil
}

// Disk returns the bytes allocated on disk (what du reports) and the
// apparent size (the sum of file lengths) of the system's data directories.
// Both count preallocated but unwritten log segments.
func (s *System) Disk() (allocated, apparent int64, err error) {
	for _, d := range s.DataDirs {
		err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				allocated += st.Blocks * 512
			}
			if info.Mode().IsRegular() {
				apparent += info.Size()
			}
			return nil
		})
		if err != nil {
			return 0, 0, fmt.Errorf("size of %s: %w", d, err)
		}
	}
	return allocated, apparent, nil
}

// Log returns the tail of each node's log, for error messages.
func (s *System) Log() string {
	var b strings.Builder
	for _, p := range s.procs {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.name, p.logPath, p.tail(40))
	}
	return b.String()
}

func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("pid %d: unexpected VmRSS line %q", pid, line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("pid %d: VmRSS %q: %w", pid, f[0], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS in status (exited?)", pid)
}

// proc is one child process in a process group of its own, with its
// output in a log file. Its waiter goroutine ends when the process does.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	waitErr error
	once    sync.Once
}

func startProc(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop signals the process group this proc created (a negative pid names
// the group) and waits for the process to be reaped.
func (p *proc) stop(grace time.Duration) {
	p.once.Do(func() {
		pgid := -p.cmd.Process.Pid
		if !p.exited() {
			_ = syscall.Kill(pgid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(grace):
			}
		}
		// Anything the child spawned dies with the group, even once the
		// child itself is gone.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
		p.logFile.Close()
	})
}

func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errPortTaken means another process bound a port between freePorts and the
// server's bind: starting again with new ports fixes it.
var errPortTaken = errors.New("port taken by another process")

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady polls ready until it says true, a process exits, or ctx ends.
func waitReady(ctx context.Context, s *System, ready func(ctx context.Context) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range s.procs {
			if p.exited() {
				log := p.tail(60)
				if strings.Contains(strings.ToLower(log), "address already in use") {
					return fmt.Errorf("%s exited: %w", p.name, errPortTaken)
				}
				return fmt.Errorf("%s exited before serving (%v); log tail:\n%s", p.name, p.waitErr, log)
			}
		}
		if ready(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving: %w; logs:\n%s", s.Name, ctx.Err(), s.Log())
		case <-tick.C:
		}
	}
}

// tcpOpen reports whether every addr accepts a TCP connection.
func tcpOpen(ctx context.Context, addrs ...string) bool {
	for _, a := range addrs {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", a)
		cancel()
		if err != nil {
			return false
		}
		c.Close()
	}
	return true
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
