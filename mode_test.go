package throttle_test

import (
	"testing"

	"github.com/throttlekit/throttle"
)

func TestTransportModeWithoutRedis(t *testing.T) {
	tr := throttle.NewTransport(nil)
	if m := tr.Mode(); m != throttle.ModeLocal {
		t.Fatalf("Mode() = %v, want local", m)
	}
}
