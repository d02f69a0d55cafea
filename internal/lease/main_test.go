package lease_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// renewal loop, pub/sub reader or background release left behind is a leak
// in a store that sits under every HTTP call. A test binary started as the
// crash test's child holds leases instead of running tests.
func TestMain(m *testing.M) {
	runChildIfAsked()
	goleak.VerifyTestMain(m)
}
