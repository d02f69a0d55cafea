package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the example's tests if any goroutine outlives them: the
// replicas, the embedded store and the fake API must all shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
