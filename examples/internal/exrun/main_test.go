package exrun

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// phase's workers and its progress printer must all end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
