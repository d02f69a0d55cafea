//go:build !linux

package fleettest

import "os/exec"

// setDeathSignal does nothing where the kernel has no parent-death signal:
// the test's cleanup still kills every worker.
func setDeathSignal(*exec.Cmd) {}
