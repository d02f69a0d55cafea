package middleware_test

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
// waiter or timer left behind is a leak in a handler that sits under every
// request of a server.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}
