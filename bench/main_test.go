package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the suite if any goroutine outlives it: a benchmark's
// Transport, Redis client or redis-server watcher left running would skew
// the next one.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
