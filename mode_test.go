package throttle

import "testing"

func TestTransportModeWithoutRedis(t *testing.T) {
	tr := NewTransport(nil)
	if m := tr.Mode(); m != ModeLocal {
		t.Fatalf("Mode() = %v, want local", m)
	}
}
