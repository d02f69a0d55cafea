//go:build unix

package redistest

import (
	"os"
	"syscall"
)

// Signals used to freeze, thaw and gracefully stop a server. They live behind a
// build tag because SIGSTOP and SIGCONT do not exist on every platform.
var (
	sigPause     os.Signal = syscall.SIGSTOP
	sigResume    os.Signal = syscall.SIGCONT
	sigTerminate os.Signal = syscall.SIGTERM
)
