package outage

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// guarded call, notifier or timer left behind is a leak in a store that
// sits under every HTTP call. It is the only TestMain of package outage.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
