//go:build unix && !linux

package testenv

import "syscall"

// childSysProcAttr puts a child in its own process group. Only Linux can
// also tie the child's life to the test binary's.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
