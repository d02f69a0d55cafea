package algorithm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// conformance tests start Redis clients and servers). It is the only
// TestMain of package algorithm_test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
