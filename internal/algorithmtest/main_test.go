package algorithmtest

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/throttlekit/throttle/internal/fleettest"
)

// TestMain runs the worker when this binary was re-executed as one, and
// otherwise the tests, checking that no goroutine outlives them.
func TestMain(m *testing.M) {
	fleettest.DispatchWorker(nil)
	goleak.VerifyTestMain(m)
}
