//go:build unix && !linux

package servers

import "syscall"

// childSysProcAttr puts a child in its own process group.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
