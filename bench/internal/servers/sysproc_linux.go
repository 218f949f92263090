package servers

import "syscall"

// childSysProcAttr puts a child in its own process group, so stopping it
// reaches everything it spawned, and has the kernel kill it if the
// benchmark dies first, so no server outlives the run.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
