package providers_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// presets' tests run Transports, and a waiter, timer or connection left
// behind is a leak. It is the only TestMain of package providers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
