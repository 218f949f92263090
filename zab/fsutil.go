package zab

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fileSystem is the filesystem as the log uses it: the few operations
// whose durability its recovery rule depends on (see scanSegment). osFS is
// the real one; tests substitute a disk that loses power (powerFS).
type fileSystem interface {
	// ReadDir lists the names of dir's regular files.
	ReadDir(dir string) ([]string, error)
	ReadFile(path string) ([]byte, error)
	// OpenFile opens path with os.OpenFile's flags, creating it 0o644.
	OpenFile(path string, flag int) (logFile, error)
	Remove(path string) error
	Rename(from, to string) error
	// SyncDir makes dir's entries (files created, renamed and removed in
	// it) durable.
	SyncDir(dir string) error
}

// logFile is an open file of a fileSystem.
type logFile interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	Name() string
	Size() (int64, error)
	Truncate(size int64) error
	// Sync flushes the file's data and metadata to stable storage (fsync).
	Sync() error
	// Datasync flushes its data and the metadata needed to read it back,
	// its size (fdatasync); cheaper than Sync because it skips timestamps.
	Datasync() error
	// Allocate allocates the file's blocks up to size and sets its size to
	// at least size (the new space reads as zeros), so that writes inside
	// it do not grow the file. It never shrinks the file. It returns an
	// error wrapping errNoPreallocate when the filesystem cannot.
	Allocate(size int64) error
	Close() error
}

// errNoPreallocate means the filesystem does not support preallocating a
// file's blocks.
var errNoPreallocate = errors.New("preallocation not supported")

// osFS is the operating system's filesystem.
type osFS struct{}

func (osFS) ReadDir(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		if de.Type().IsRegular() {
			names = append(names, de.Name())
		}
	}
	return names, nil
}

func (osFS) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (osFS) Remove(path string) error             { return os.Remove(path) }
func (osFS) Rename(from, to string) error         { return os.Rename(from, to) }

func (osFS) OpenFile(path string, flag int) (logFile, error) {
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) SyncDir(dir string) error {
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

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f osFile) Datasync() error {
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

// Allocate is fallocate mode 0. EOPNOTSUPP, or EINVAL for a mode the
// filesystem lacks, mean it cannot preallocate.
func (f osFile) Allocate(size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
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

// writeFileAtomic replaces path with data so that after a crash the file
// holds either the old or the new content, never a mix: it writes a
// temporary file, fsyncs it, renames it over path and fsyncs the directory.
func writeFileAtomic(fsys fileSystem, path string, data []byte) error {
	return createFileAtomic(fsys, path, data, nil)
}

// createFileAtomic is writeFileAtomic with a prepare step, which may
// change the temporary file (after data is written, before the fsync).
// The temporary file is removed if anything fails before the rename.
func createFileAtomic(fsys fileSystem, path string, data []byte, prepare func(logFile) error) error {
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
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
		fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// removeFileDurably removes path and fsyncs its directory before it
// returns, so that removals made one after another reach the disk in that
// order: a filesystem may otherwise persist a later removal without an
// earlier one.
func removeFileDurably(fsys fileSystem, path string) error {
	if err := fsys.Remove(path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
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
