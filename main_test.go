package throttle

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// waiter, timer or connection left behind is a leak in a library that sits
// under every HTTP call. It is the only TestMain of package throttle.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
