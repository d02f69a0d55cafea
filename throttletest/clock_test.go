package throttletest_test

import (
	"testing"
	"time"

	"github.com/throttlekit/throttle/throttletest"
)

func TestFakeClock(t *testing.T) {
	fc := throttletest.NewFakeClock(t0)
	a := fc.NewTimer(2 * time.Second)
	b := fc.NewTimer(time.Second)
	c := fc.NewTimer(3 * time.Second)
	if fc.Timers() != 3 {
		t.Fatalf("%d timers pending, want 3", fc.Timers())
	}
	if !fc.AdvanceToNext() || !fc.Now().Equal(t0.Add(time.Second)) {
		t.Fatalf("AdvanceToNext moved to %v, want +1s", fc.Now())
	}
	select {
	case at := <-b.C():
		if !at.Equal(t0.Add(time.Second)) {
			t.Errorf("b fired at %v", at)
		}
	default:
		t.Fatal("b did not fire")
	}
	if !c.Stop() || c.Stop() {
		t.Error("Stop: want true once, then false")
	}
	fc.Advance(time.Hour)
	if a.Stop() {
		t.Error("a fired timer stopped")
	}
	if fc.AdvanceToNext() {
		t.Error("AdvanceToNext with no timer pending")
	}
	select {
	case <-c.C():
		t.Error("a stopped timer fired")
	default:
	}
	// A timer of d ≤ 0 has fired already; a clock may go backwards.
	if z := fc.NewTimer(0); len(z.C()) != 1 || fc.Timers() != 0 {
		t.Error("a timer of 0 did not fire at once")
	}
	fc.Set(t0)
	if !fc.Now().Equal(t0) {
		t.Errorf("Set: %v", fc.Now())
	}
	// WaitTimers returns when its stop condition holds.
	done := make(chan struct{})
	go func() { fc.WaitTimers(5, func() bool { return true }); close(done) }()
	<-done
}
