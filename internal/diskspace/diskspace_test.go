package diskspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/januskv/janus/internal/testenv"
)

func TestUnwritable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("write: %w", unix.ENOSPC), true},
		{&os.PathError{Op: "open", Path: "x", Err: unix.EROFS}, true},
		{fmt.Errorf("quota: %w", unix.EDQUOT), true},
		{fmt.Errorf("statfs: %w", unix.ENOENT), true},
		{fmt.Errorf("read: %w", unix.EIO), false},
		{errors.New("other"), false},
	} {
		if got := Unwritable(tc.err); got != tc.want {
			t.Errorf("Unwritable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Check tells a file system below the reserve, a read-only one and a
// directory that is gone apart from one that takes writes.
func TestCheck(t *testing.T) {
	mnt := testenv.MountTmpfs(t, 4<<20)
	if err := Check(mnt, 1<<20, 1<<20); err != nil {
		t.Fatalf("empty 4 MiB tmpfs, 1 MiB reserve, 1 MiB write: %v", err)
	}
	if err := Check(mnt, 3<<20, 2<<20); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("4 MiB tmpfs, 3 MiB reserve, 2 MiB write: %v, want ENOSPC", err)
	}
	if err := Check(filepath.Join(mnt, "gone"), 0, 0); !errors.Is(err, unix.ENOENT) || !Unwritable(err) {
		t.Fatalf("missing directory: %v, want ENOENT", err)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(mnt, ro, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	defer unix.Unmount(ro, unix.MNT_DETACH)
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	if err := Check(ro, 0, 0); !errors.Is(err, unix.EROFS) {
		t.Fatalf("read-only mount: %v, want EROFS", err)
	}
}
