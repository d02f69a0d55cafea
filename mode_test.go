package throttle

import (
	"testing"

	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/store"
)

func TestTransportModeWithoutRedis(t *testing.T) {
	tr := NewTransport(nil)
	if m := tr.Mode(); m != ModeLocal {
		t.Fatalf("Mode() = %v, want local", m)
	}
}

// TestDefaultsMatchTheStores: the root's documented defaults are the ones
// the internal stores apply on their own.
func TestDefaultsMatchTheStores(t *testing.T) {
	if DefaultRedisTimeout != outage.DefaultTimeout {
		t.Errorf("DefaultRedisTimeout %v, outage.DefaultTimeout %v", DefaultRedisTimeout, outage.DefaultTimeout)
	}
	if DefaultFleetSize != store.DefaultFleetSize {
		t.Errorf("DefaultFleetSize %d, store.DefaultFleetSize %d", DefaultFleetSize, store.DefaultFleetSize)
	}
}
