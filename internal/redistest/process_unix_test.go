//go:build unix

package redistest

import (
	"errors"
	"syscall"
)

// processExists reports whether pid names a process, zombies included, so a
// false result also proves the child was reaped.
func processExists(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
