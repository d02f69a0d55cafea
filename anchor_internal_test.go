package throttle

import (
	"testing"
	"time"
)

func TestAnchorsLearn(t *testing.T) {
	var a anchors
	base := time.Unix(1_700_000_000, 0) // 800 s past a Unix hour
	a.learn("k", base.Add(600*time.Second), time.Hour)
	if got := a.get("k"); got != 1400*time.Second {
		t.Fatalf("anchor %v, want 1400s", got)
	}
	// A reset within a second of the boundary (a Unix second rounded the
	// other way) keeps it; one further moves it, across the hour too.
	a.learn("k", base.Add(600*time.Second+900*time.Millisecond), time.Hour)
	if got := a.get("k"); got != 1400*time.Second {
		t.Errorf("a reset 0.9 s off moved the anchor to %v", got)
	}
	a.learn("k", base.Add(-3000*time.Second-500*time.Millisecond), time.Hour) // 1399.5 s past the hour before
	if got := a.get("k"); got != 1400*time.Second {
		t.Errorf("the same boundary an hour before moved the anchor to %v", got)
	}
	a.learn("k", base.Add(605*time.Second), time.Hour)
	if got := a.get("k"); got != 1405*time.Second {
		t.Errorf("a reset 5 s off: anchor %v, want 1405s", got)
	}
	if got := a.get("other"); got != 0 {
		t.Errorf("an unknown key's anchor %v, want 0", got)
	}
}
