package testenv

import "syscall"

// childSysProcAttr puts a child in its own process group and has the kernel
// kill it if the test binary dies first (a go test -timeout panic runs no
// cleanups), so no reference server outlives its test.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
