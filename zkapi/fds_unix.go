//go:build unix

package zkapi

import (
	"os"
	"syscall"
)

// fileDescriptors returns the files the process has open and its limit
// (RLIMIT_NOFILE), which ZooKeeper's mntr reports on Unix only.
func fileDescriptors() (open, limit int64, ok bool) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		if fds, err = os.ReadDir("/dev/fd"); err != nil {
			return 0, 0, false
		}
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, false
	}
	return int64(len(fds)), int64(rl.Cur), true
}
