package redistest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain proves the helpers leave no goroutine behind once their cleanups
// have run, which the tests of other packages rely on.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
