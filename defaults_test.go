package throttle

import (
	"testing"

	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/store"
)

// TestDefaultsMatchTheStores: the root's documented defaults are the ones
// the internal stores apply on their own.
func TestDefaultsMatchTheStores(t *testing.T) {
	if defaultRedisTimeout != outage.DefaultTimeout {
		t.Errorf("defaultRedisTimeout %v, outage.DefaultTimeout %v", defaultRedisTimeout, outage.DefaultTimeout)
	}
	// WithFleetShare's doc: "a tenth before the first heartbeat".
	if store.DefaultFleetSize != 10 {
		t.Errorf("store.DefaultFleetSize %d, WithFleetShare documents 10", store.DefaultFleetSize)
	}
}
