package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWritebackOf starts writeback of every dirty page of the file at path
// (SYNC_FILE_RANGE_WRITE alone: it neither waits for pages under writeback
// nor for the ones it starts).
func startWritebackOf(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}

// osWritebackKick returns how this system starts writeback of a file.
func osWritebackKick() func(path string) error { return startWritebackOf }
