//go:build !linux

package fleettest

import "os/exec"

// setDeathSignal does nothing where the kernel has no parent-death signal:
// the test's cleanup still kills every worker.
func setDeathSignal(*exec.Cmd) {}

// processRuns reports true: without a portable test, no other process's
// worker directory is swept.
func processRuns(int) bool { return true }
