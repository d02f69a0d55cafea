package redistest

import (
	"os/exec"
	"testing"
)

// installHint is part of every missing-binary failure so that whoever reads
// the log can fix the machine without searching: these tests fail rather than
// skip, because a silently skipped Redis test hides real regressions.
const installHint = "install Redis: apt-get update && apt-get install -y redis-server " +
	"(Debian/Ubuntu; redis-cli comes with redis-tools) or brew install redis (macOS)"

// lookBinary returns the path of name on PATH or fails the test with
// installation instructions.
func lookBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s not found on PATH (%v); %s", name, err, installHint)
	}
	return path
}
