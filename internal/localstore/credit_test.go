package localstore

import "testing"

// TestCreditBound: a credit is never usable beyond (mark − t) / interval,
// lapses with time, keeps the later of two marks, and a refund adds to
// what is still usable, not to what has lapsed.
func TestCreditBound(t *testing.T) {
	const iv = 10
	c := credit{}.refunded(0, iv, 3, 50)
	if c != (credit{units: 3, mark: 50}) {
		t.Fatalf("refund of 3 with mark 50 at 0: %+v, want 3 units, mark 50", c)
	}
	for _, tc := range []struct {
		at   int64
		want int64
	}{{0, 3}, {20, 3}, {21, 2}, {30, 2}, {39, 1}, {40, 1}, {41, 0}, {50, 0}, {100, 0}} {
		if got := c.usable(tc.at, iv); got != tc.want {
			t.Errorf("usable at %d: %d, want %d", tc.at, got, tc.want)
		}
	}
	if got := (credit{}).refunded(45, iv, 3, 50); got != (credit{}) {
		t.Errorf("refund whose mark is within an interval: %+v, want none", got)
	}
	// At 25, 2 units are usable; 4 more with a later mark (100): 6, within
	// (100 − 25) / 10 = 7.
	if got := c.refunded(25, iv, 4, 100); got != (credit{units: 6, mark: 100}) {
		t.Errorf("second refund: %+v, want 6 units, mark 100", got)
	}
	// An earlier mark never loosens the bound.
	if got := c.refunded(25, iv, 9, 30); got != (credit{units: 2, mark: 50}) {
		t.Errorf("refund with an older mark: %+v, want 2 units (the bound at 25), mark 50", got)
	}
	if got := (credit{units: 5, mark: 50}).usable(0, 0); got != 0 {
		t.Errorf("usable with interval 0: %d, want 0", got)
	}
}
