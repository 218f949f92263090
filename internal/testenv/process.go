package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// freePorts is FreePorts for this package's starters.
func freePorts(t testing.TB, n int) []int { return FreePorts(t, n) }

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago, for servers whose configuration must name their ports before they
// start (an ensemble's peer list, a zoo.cfg). They are drawn at random
// from below the kernel's ephemeral range: a port the kernel picked for
// ":0" could be given next to another test's listener or, worse, to the
// source end of an outgoing connection (a member dialling its peers)
// before the server binds it. Holding all n listeners until all are
// chosen keeps them distinct; another test drawing the same port in
// between is why starters still retry on a bind failure.
//
// A port is also claimed across processes for the life of this one (see
// claimPort): go test runs packages in parallel, and a member killed and
// restarted on its fixed peer port must not find that another package's
// test drew the port while the member was down.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	lo, hi := 10000, ephemeralLow()
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("testenv: no free loopback port in [%d, %d)", lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		if !claimPort(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	return ports
}

// claimedPorts are the lock files of the ports this process has claimed,
// kept open (and so locked) until it exits.
var claimedPorts struct {
	sync.Mutex
	files map[int]*os.File
}

// claimPort takes an exclusive lock on a file named for port, shared by
// every test process on the machine, and keeps it until this process
// exits (the kernel drops the lock then, however the process ends). It
// reports false if this or another process holds the port already. Where
// locks cannot be taken at all, it claims every port, as before.
func claimPort(port int) bool {
	claimedPorts.Lock()
	defer claimedPorts.Unlock()
	if _, mine := claimedPorts.files[port]; mine {
		return false
	}
	dir := filepath.Join(os.TempDir(), "janus-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	if claimedPorts.files == nil {
		claimedPorts.files = map[int]*os.File{}
	}
	claimedPorts.files[port] = f
	return true
}

// ephemeralLow is the lowest port the kernel hands out on its own
// (net.ipv4.ip_local_port_range), 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 11000 {
		return 32768
	}
	return low
}

// process is a child process started by a helper, with its combined output
// in a log file. Its one waiter goroutine lives until the process exits;
// stop ends the process and waits for that goroutine.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File

	done    chan struct{} // closed once the process has exited
	waitErr error         // valid after done is closed

	stopOnce sync.Once
}

// startProcess starts cmd with its stdout and stderr in logPath and registers
// a cleanup that kills it and, if the test failed, prints its log.
func startProcess(t testing.TB, name string, cmd *exec.Cmd, logPath string) (*process, error) {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// A process group of its own lets stop kill anything the child spawned
	// (zkCli.sh and friends are shell scripts that start a JVM).
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("testenv: log of %s (%s):\n%s", name, logPath, tail(p.log(), 200))
		}
	})
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop kills the process group and waits for the process to be reaped. It
// is safe to call more than once.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		if done, _ := p.exited(); !done {
			// Negative pid: the whole group this helper created, nothing else.
			if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				p.cmd.Process.Kill()
			}
		}
		<-p.done
		p.logFile.Close()
	})
}

// log returns everything the process has written so far.
func (p *process) log() string { return readLog(p.logPath) }

func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return string(b)
}

// readTail returns the last n lines of the log at path.
func readTail(path string, n int) string { return tail(readLog(path), n) }

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("... (%d lines omitted)\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}

// commandContext is exec.CommandContext for short-lived client programs: the
// child gets its own process group, and ctx ending kills that whole group,
// not just the direct child. zkCli.sh, for one, is a shell script whose JVM
// would otherwise outlive it.
func commandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = childSysProcAttr()
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Output pipes held open by a killed group's stragglers must not block Wait.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
