package localstore

import "testing"

func TestGCRAAdjust(t *testing.T) {
	const now, iv = 1000, 10
	for _, tc := range []struct {
		name            string
		tat, delta, out int64
	}{
		{"charge a bucket with room books from now", 500, 3, now + 30},
		{"charge a queue adds to its end", now + 50, 2, now + 70},
		{"refund part of a queue", now + 50, -2, now + 30},
		{"refund more than the queue stops at now", now + 50, -9, now},
		{"refund a bucket with room changes nothing", 900, -3, 900},
		{"refund at exactly now", now, -1, now},
	} {
		if got := gcraAdjust(tc.tat, now, iv, tc.delta); got != tc.out {
			t.Errorf("%s: gcraAdjust(%d, %d) = %d, want %d", tc.name, tc.tat, tc.delta, got, tc.out)
		}
	}
}
