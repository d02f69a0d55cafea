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
