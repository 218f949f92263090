// Package diskspace tells a disk that cannot take a write now from one
// that failed: a full or read-only file system is a condition a member
// reports and waits out (the NOSPACE alarm), while any other I/O error
// stops it. It also checks a directory's free space against a reserve
// before a write is made, because Badger writes its logs through memory
// maps of sparse files, where a full disk is a SIGBUS, not an error.
package diskspace

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Unwritable reports whether err says the disk cannot take a write for
// now but may later: it is full (ENOSPC), over a quota (EDQUOT), read-only
// (EROFS), or the directory written to is gone (ENOENT).
func Unwritable(err error) bool {
	for _, errno := range []error{unix.ENOSPC, unix.EDQUOT, unix.EROFS, unix.ENOENT} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// Check returns nil if dir's file system is writable and has more than
// reserve+need bytes free for an unprivileged writer, and otherwise an
// error wrapping ENOSPC, EROFS or ENOENT (so that Unwritable holds for
// it). Any other failure to look is returned as it is.
func Check(dir string, reserve, need int64) error {
	free, err := statFree(dir)
	if err != nil {
		return err
	}
	return compare(dir, free, reserve, need)
}

// compare refuses a write of need bytes that would leave dir's file
// system, with free bytes free, at or below reserve.
func compare(dir string, free, reserve, need int64) error {
	if free-need < reserve {
		return fmt.Errorf("%s has %d bytes free, a write of %d needs them above the reserve of %d: %w",
			dir, free, need, reserve, unix.ENOSPC)
	}
	return nil
}
