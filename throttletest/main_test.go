package throttletest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// server, a service-time timer or a client connection left behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
