package zab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data, and the metadata needed to read it back (its
// size), to stable storage. It is cheaper than fsync because it skips
// timestamps.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		return nil
	}
}

// syncDir makes the directory's entries (created, renamed and removed
// files) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// errNoPreallocate means the filesystem does not support preallocating a
// file's blocks.
var errNoPreallocate = errors.New("preallocation not supported")

// preallocate allocates f's blocks up to size and sets its size to at
// least size (fallocate mode 0; the new space reads as zeros), so writes
// inside it do not grow the file. It never shrinks f. It returns an error
// wrapping errNoPreallocate when the filesystem refuses (EOPNOTSUPP, or
// EINVAL for a mode it lacks).
func preallocate(f *os.File, size int64) error {
	for {
		err := fallocate(int(f.Fd()), 0, 0, size)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
			return fmt.Errorf("%w: fallocate %s: %v", errNoPreallocate, f.Name(), err)
		}
		return fmt.Errorf("fallocate %s: %w", f.Name(), err)
	}
}

// fallocate is unix.Fallocate; tests replace it to play a filesystem
// without preallocation.
var fallocate = unix.Fallocate

// writeFileAtomic replaces path with data so that after a crash the file
// holds either the old or the new content, never a mix: it writes a
// temporary file, fsyncs it, renames it over path and fsyncs the directory.
func writeFileAtomic(path string, data []byte) error {
	return createFileAtomic(path, data, nil)
}

// createFileAtomic is writeFileAtomic with a prepare step, which may
// change the temporary file (after data is written, before the fsync).
// The temporary file is removed if anything fails before the rename.
func createFileAtomic(path string, data []byte, prepare func(*os.File) error) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	err = func() error {
		if _, err := f.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", tmp, err)
		}
		if prepare != nil {
			if err := prepare(f); err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", tmp, err)
		}
		return nil
	}()
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", tmp, cerr)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(filepath.Dir(path))
}

// tmpSuffix marks files that are not yet in place; leftovers from a crash
// are removed on Open.
const tmpSuffix = ".tmp"

// dirLock is an exclusive advisory lock on a log directory, so that two
// members (in one process or two) never write one log.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("log directory %s is in use by another member", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	// Closing the descriptor drops the flock.
	return l.f.Close()
}
