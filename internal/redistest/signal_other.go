//go:build !unix

package redistest

import "os"

// Without job-control signals Pause and Resume cannot work; os.Kill keeps the
// package compiling and makes the misuse visible (the server dies) rather than
// silently ignored. Graceful stop degrades to a kill.
var (
	sigPause     os.Signal = os.Kill
	sigResume    os.Signal = os.Kill
	sigTerminate os.Signal = os.Kill
)
