//go:build !linux

package redistest

import "os/exec"

// setDeathSignal is a no-op outside Linux, which lacks Pdeathsig; there the
// t.Cleanup kill is the only guard against orphaned servers.
func setDeathSignal(*exec.Cmd) {}
