package store

import (
	"testing"
	"time"
)

// TestTimeoutFor: a call of a script of its own is bounded as cold until
// one of its kind has answered, whatever the other calls did.
func TestTimeoutFor(t *testing.T) {
	const d = 50 * time.Millisecond
	tm := NewTimeout(d)
	if got := tm.Next(); got != ColdTimeout {
		t.Fatalf("Next before any answer = %v, want %v", got, ColdTimeout)
	}
	tm.MarkWarm()
	if got := tm.Next(); got != d {
		t.Fatalf("Next once warm = %v, want %v", got, d)
	}
	if got := tm.For("limit"); got != ColdTimeout {
		t.Fatalf("For(limit) before a limit answered = %v, want %v", got, ColdTimeout)
	}
	tm.Answered("limit")
	if got := tm.For("limit"); got != d {
		t.Fatalf("For(limit) after a limit answered = %v, want %v", got, d)
	}
	if got := tm.For("pause"); got != ColdTimeout {
		t.Fatalf("For(pause) after only a limit answered = %v, want %v", got, ColdTimeout)
	}
	// A bound longer than the cold one is kept as it is.
	long := NewTimeout(2 * ColdTimeout)
	if got := long.For("limit"); got != 2*ColdTimeout {
		t.Fatalf("For with a 2 s bound = %v, want %v", got, 2*ColdTimeout)
	}
	// An answer of a kind warms the Transport's first calls too.
	fresh := NewTimeout(d)
	fresh.Answered("pause")
	if got := fresh.Next(); got != d {
		t.Fatalf("Next after a pause answered = %v, want %v", got, d)
	}
}
