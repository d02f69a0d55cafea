package fleettest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
)

func ms(vs ...int) []time.Duration {
	out := make([]time.Duration, len(vs))
	for i, v := range vs {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestMaxInWindow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times []time.Duration
		w     time.Duration
		want  int
		from  time.Duration
	}{
		{"empty", nil, time.Second, 0, 0},
		{"zero window", ms(1, 2), 0, 0, 0},
		{"one", ms(5), time.Second, 1, 5 * time.Millisecond},
		{"half-open end excluded", ms(0, 1000), time.Second, 1, 0},
		{"just inside", ms(0, 999), time.Second, 2, 0},
		{"busiest later", ms(0, 1500, 1600, 1700, 2400), time.Second, 4, 1500 * time.Millisecond},
		{"unsorted input", ms(1700, 0, 1600, 2400, 1500), time.Second, 4, 1500 * time.Millisecond},
		{"ties count", ms(10, 10, 10), time.Millisecond, 3, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.times)
			got, win := fleettest.MaxInWindow(tc.times, tc.w)
			if got != tc.want {
				t.Errorf("MaxInWindow = %d, want %d", got, tc.want)
			}
			if got > 0 && (win.From != tc.from || win.Len() != tc.w) {
				t.Errorf("window = %+v, want from %v, length %v", win, tc.from, tc.w)
			}
			if !slices.Equal(in, tc.times) {
				t.Errorf("input modified: %v", tc.times)
			}
		})
	}
}

func TestIntervalHelpers(t *testing.T) {
	ts := ms(100, 200, 1100, 1200, 1300, 3500)
	t.Run("CountIn half-open", func(t *testing.T) {
		if got := fleettest.CountIn(ts, 200*time.Millisecond, 1200*time.Millisecond); got != 2 {
			t.Errorf("CountIn = %d, want 2", got)
		}
	})
	t.Run("RateIn", func(t *testing.T) {
		if got := fleettest.RateIn(ts, time.Second, 2*time.Second); got != 3 {
			t.Errorf("RateIn = %v, want 3", got)
		}
		if got := fleettest.RateIn(ts, time.Second, time.Second); got != 0 {
			t.Errorf("RateIn of an empty interval = %v, want 0", got)
		}
	})
	t.Run("FirstIn finds", func(t *testing.T) {
		got, ok := fleettest.FirstIn(ts, time.Second, 2*time.Second)
		if !ok || got != 1100*time.Millisecond {
			t.Errorf("FirstIn = %v, %v; want 1.1s, true", got, ok)
		}
	})
	t.Run("FirstIn quiet gap", func(t *testing.T) {
		if got, ok := fleettest.FirstIn(ts, 1300*time.Millisecond+1, 3500*time.Millisecond); ok {
			t.Errorf("FirstIn = %v, want none", got)
		}
	})
	t.Run("PerSecond", func(t *testing.T) {
		got := fleettest.PerSecond(ts, 0)
		if want := []int{2, 3, 0, 1}; !slices.Equal(got, want) {
			t.Errorf("PerSecond = %v, want %v", got, want)
		}
	})
	t.Run("Span", func(t *testing.T) {
		first, last, ok := fleettest.Span(ts)
		if !ok || first != 100*time.Millisecond || last != 3500*time.Millisecond {
			t.Errorf("Span = %v, %v, %v", first, last, ok)
		}
		if _, _, ok := fleettest.Span(nil); ok {
			t.Error("Span(nil) ok")
		}
	})
}

func TestMaxInWindowStarting(t *testing.T) {
	ts := ms(0, 100, 900, 1000, 1050, 1100, 2500)
	for _, tc := range []struct {
		name     string
		from, to time.Duration
		want     int
		start    time.Duration
	}{
		{"whole span is MaxInWindow", 0, 3 * time.Second, 4, 100 * time.Millisecond},
		{"only the span's starts", 0, 50 * time.Millisecond, 3, 0},
		{"start after the busy part", 1200 * time.Millisecond, 3 * time.Second, 1, 2500 * time.Millisecond},
		{"window reaching past the span's end", 1100*time.Millisecond + 1, 2 * time.Second, 1, 2*time.Second - 1},
		{"no arrival reachable", 2600 * time.Millisecond, 3 * time.Second, 0, 0},
		{"empty span", time.Second, time.Second, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, win := fleettest.MaxInWindowStarting(ts, time.Second, tc.from, tc.to)
			if got != tc.want {
				t.Errorf("MaxInWindowStarting = %d, want %d", got, tc.want)
			}
			if got > 0 && (win.From != tc.start || win.Len() != time.Second) {
				t.Errorf("window = %+v, want from %v, length 1s", win, tc.start)
			}
			if got > 0 && fleettest.CountIn(ts, win.From, win.To) != got {
				t.Errorf("window %+v holds %d arrivals, reported %d", win, fleettest.CountIn(ts, win.From, win.To), got)
			}
		})
	}
}
