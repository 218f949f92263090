package servers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestVMRSSOfThisProcess(t *testing.T) {
	n, err := vmRSS(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if n <= 0 {
		t.Errorf("VmRSS of this process = %d, want > 0", n)
	}
}

func TestDiskCountsEveryFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		size int
	}{{"a", 1000}, {"sub/b", 5000}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), make([]byte, f.size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &System{DataDirs: []string{dir}}
	alloc, apparent, err := s.Disk()
	if err != nil {
		t.Fatal(err)
	}
	if apparent != 6000 {
		t.Errorf("apparent size = %d, want 6000", apparent)
	}
	if alloc <= 0 {
		t.Errorf("allocated size = %d, want > 0", alloc)
	}
}

func TestRenderZooCfgIsSortedWithQuorumLast(t *testing.T) {
	got := renderZooCfg(map[string]string{"tickTime": "2000", "clientPort": "1"}, []string{"server.1=127.0.0.1:2:3"})
	want := "clientPort=1\ntickTime=2000\nserver.1=127.0.0.1:2:3\n"
	if got != want {
		t.Errorf("zoo.cfg =\n%s\nwant\n%s", got, want)
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields 14 (utime) and 15 (stime) are 250 and 17; the command names
	// hold spaces and parentheses, which the fields are counted after.
	tail := " S 1 2 3 0 -1 4194560 100 0 0 0 250 17 4 5 20 0 12 0 1000 3000000 400"
	for _, comm := range []string{"(java)", "(my server)", "(a) b (c))", "(x) 9 9 9)"} {
		got, err := parseStatCPU("4242 " + comm + tail)
		if err != nil {
			t.Errorf("comm %s: %v", comm, err)
			continue
		}
		if got != 267 {
			t.Errorf("comm %s: utime+stime = %d ticks, want 267", comm, got)
		}
	}
	for _, bad := range []string{"", "4242 java S 1 2", "4242 (java) S 1 2 3", "4242 (java)" + strings.Replace(tail, " 250 ", " x ", 1)} {
		if got, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) = %d, want an error", bad, got)
		}
	}
}

func TestProcCPUOfThisProcess(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	// Spin until the kernel has charged this process at least two more
	// clock ticks: the reading must follow the CPU the test burns.
	deadline := time.Now().Add(10 * time.Second)
	var after time.Duration
	for x := uint64(1); ; x = x*6364136223846793005 + 1 {
		if x%(1<<16) == 0 {
			if after, err = procCPU(os.Getpid()); err != nil {
				t.Fatal(err)
			}
			if after-before >= 20*time.Millisecond || time.Now().After(deadline) {
				break
			}
		}
	}
	if after-before < 20*time.Millisecond {
		t.Errorf("CPU of this process went from %v to %v after spinning, want at least 20ms more", before, after)
	}
	if after > 0 && after%(10*time.Millisecond) != 0 {
		t.Errorf("CPU %v is not a whole number of 10ms clock ticks", after)
	}
}

func TestSystemCPUSumsMembers(t *testing.T) {
	// Two members that are both this process count it twice.
	me := &proc{name: "self", cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}}
	one, err := (&System{procs: []*proc{me}}).CPU()
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	two, err := (&System{procs: []*proc{me, me}}).CPU()
	if err != nil {
		t.Fatal(err)
	}
	if two < 2*one {
		t.Errorf("CPU of two members = %v, want at least twice one member's %v", two, one)
	}
}
