//go:build linux

package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL the child when the test binary dies,
// even if it is killed before any t.Cleanup can run (e.g. by go test -timeout).
// Strictly the signal fires when the OS thread that forked the child exits;
// the Go runtime only retires threads of goroutines that exit while locked
// with runtime.LockOSThread, which test code starting servers does not do.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
