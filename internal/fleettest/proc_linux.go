//go:build linux

package fleettest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL a worker when the test binary
// dies, even before any cleanup can run (go test -timeout, a crash).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processRuns reports whether a process of that pid exists.
func processRuns(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}
