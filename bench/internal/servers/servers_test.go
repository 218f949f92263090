package servers

import (
	"os"
	"path/filepath"
	"testing"
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
