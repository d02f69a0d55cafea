package localstore

import "testing"

func TestGCRACharge(t *testing.T) {
	const now, iv = 1000, 10
	for _, tc := range []struct {
		name            string
		tat, units, out int64
	}{
		{"a bucket with room is charged from now", 500, 3, now + 30},
		{"a queue is charged at its end", now + 50, 2, now + 70},
	} {
		if got := gcraCharge(tc.tat, now, iv, 5, tc.units); got != tc.out {
			t.Errorf("%s: gcraCharge(now%+d, %d) = now%+d, want now%+d", tc.name, tc.tat-now, tc.units, got-now, tc.out-now)
		}
	}
}

func TestGCRARefund(t *testing.T) {
	const now, iv, burst = 1000, 10, 5
	for _, tc := range []struct {
		name            string
		tat, units, out int64
	}{
		{"a bucket with nothing booked ahead is refunded", now + 40, -2, now + 20},
		{"never before now", now + 30, -9, now},
		{"a bucket with requests booked ahead gets nothing", now + 60, -2, now + 60},
		{"a bucket with room gets nothing", 900, -3, 900},
	} {
		if got := gcraCharge(tc.tat, now, iv, burst, tc.units); got != tc.out {
			t.Errorf("%s: gcraCharge(now%+d, %d) = now%+d, want now%+d", tc.name, tc.tat-now, tc.units, got-now, tc.out-now)
		}
	}
}
