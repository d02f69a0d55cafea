package lease_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quiet drops go-redis's log lines: the outage tests make it log every
// refused dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain fails the package's tests if any goroutine outlives them: a
// renewal loop, pub/sub reader or background release left behind is a leak
// in a store that sits under every HTTP call. A test binary started as the
// crash test's child holds leases instead of running tests.
func TestMain(m *testing.M) {
	runChildIfAsked()
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}
