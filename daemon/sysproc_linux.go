package daemon

import "syscall"

// childSysProcAttr puts a child in a process group of its own, and has
// the kernel kill it if the daemon's thread that started it ends (the
// daemon dies): its group's other processes are the Guard's.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
