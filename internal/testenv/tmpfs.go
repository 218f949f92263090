package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs of size bytes on a new directory and returns
// it; the test's cleanup unmounts it. Tests use it for a real file system
// that fills up. Mounting needs root (CAP_SYS_ADMIN): without it the test
// is skipped, or fails in CI (see Need).
func MountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10))
	why := ""
	if err != nil {
		why = "mount -t tmpfs: " + err.Error()
	}
	Need(t, "tmpfs", err == nil, why)
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes path until its file system has no space left, and
// returns how many bytes it wrote. Removing path frees them.
func FillDisk(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var total int64
	for len(buf) > 0 {
		n, err := f.Write(buf)
		total += int64(n)
		if errors.Is(err, unix.ENOSPC) {
			buf = buf[:len(buf)/2] // fill the last blocks too
			continue
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
	return total
}
