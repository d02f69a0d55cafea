package redisstore

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// script call, refund or connection left behind is a leak in a store that
// sits under every HTTP call. It is the only TestMain of package redisstore.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
