//go:build linux

package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL the child when the test binary dies,
// even if it is killed before any t.Cleanup can run (e.g. by go test -timeout).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
