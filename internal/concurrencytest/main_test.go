package concurrencytest

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/throttlekit/throttle/internal/faulttest"
	"github.com/throttlekit/throttle/internal/fleettest"
)

// TestMain runs the worker when this binary was re-executed as one, with
// the outage knobs applied (faulttest.Options), and otherwise the tests,
// checking that no goroutine outlives them.
func TestMain(m *testing.M) {
	fleettest.DispatchWorker(faulttest.Options)
	goleak.VerifyTestMain(m)
}
