package feedback

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them. The
// model starts none (it runs within the Transport's calls): this keeps it
// so. It is the only TestMain of package feedback.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
