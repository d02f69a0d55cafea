package header_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them. The
// parsers start none; the check keeps it so. It is the only TestMain of
// package header.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
