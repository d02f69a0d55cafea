package localstore

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them. The
// store starts none (it sweeps within Reserve, under its lock): this keeps
// it so. It is the only TestMain of package localstore.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
