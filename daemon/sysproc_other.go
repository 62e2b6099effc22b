//go:build unix && !linux

package daemon

import "syscall"

// childSysProcAttr puts a child in a process group of its own.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
