package outage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// windowAlgorithms names the window algorithms, for subtests.
var windowAlgorithms = []struct {
	name string
	alg  store.Algorithm
}{{"fixed", store.FixedWindow}, {"sliding-log", store.SlidingLog}, {"sliding-counter", store.SlidingCounter}}

// windowBucket is a window rule of quota per period.
func windowBucket(alg store.Algorithm, quota int64, period time.Duration) store.Bucket {
	return store.Bucket{Key: "w", Rule: "w", Algorithm: alg, Interval: period / time.Duration(quota),
		Burst: quota, Cost: 1, Rate: quota, Period: period}
}

// saturate runs one replica's demand at the local limiter for d: every
// step of period/50 it sends requests while they depart at once, and
// books the first that must wait, unless its last request still waits.
// It returns the departures' times from the start, in µs.
func saturate(t *testing.T, h *fbHarness, b store.Bucket, d time.Duration) []int64 {
	t.Helper()
	start := h.clk.Now()
	var deps []int64
	var last time.Time
	for h.clk.Now().Before(start.Add(d)) {
		for !last.After(h.clk.Now()) {
			r := h.reserve(t, b)
			if !r.OK {
				t.Fatalf("refused: %+v", r)
			}
			last = h.clk.Now().Add(r.Wait)
			if last.Before(start.Add(d)) {
				deps = append(deps, last.Sub(start).Microseconds())
			}
		}
		h.clk.Advance(b.Period / 50)
	}
	return deps
}

// overQuota returns the most a window bucket of b's algorithm counted, in
// its own sense, over the departures deps (µs from start, which lies at
// phase µs after a window's start), and the departures in each sense's
// windows: fixed windows' counts; the most in any trailing Period (sliding
// log); the sliding counter's estimate at each departure, rounded up.
func overQuota(alg store.Algorithm, period, phase int64, deps []int64) int64 {
	var most int64
	switch alg {
	case store.FixedWindow:
		counts := map[int64]int64{}
		for _, d := range deps {
			counts[(d+phase)/period]++
		}
		for _, n := range counts {
			most = max(most, n)
		}
	case store.SlidingLog:
		for i, d := range deps {
			j, _ := slices.BinarySearch(deps, d-period+1)
			most = max(most, int64(i-j+1))
		}
	default:
		counts := map[int64]int64{}
		for _, d := range deps {
			w := (d + phase) / period
			counts[w]++
			s := w*period - phase
			est := (counts[w-1]*(period-(d-s)) + period - 1) / period
			most = max(most, est+counts[w])
		}
	}
	return most
}

// TestFallbackWindowKeepsTheShare: in an outage a window bucket runs its
// own algorithm on the replica's share of the quota, so a replica under
// saturating demand never passes ⌊quota·share⌋ in the algorithm's own
// sense (fixed windows, any trailing Period, the counter's estimate), and
// uses it: each replica's bound, summed over shares of at most 1, is the
// fleet's. A token bucket in its place passed it by up to twice (figures
// in docs/ALGORITHMS.md).
func TestFallbackWindowKeepsTheShare(t *testing.T) {
	for _, a := range windowAlgorithms {
		alg := a.alg
		for _, tc := range []struct {
			quota  int64
			period time.Duration
			fleet  int64
		}{
			{100, time.Second, 4},
			{10, time.Second, 3},
			{5000, time.Minute, 8},
			{3, 10 * time.Second, 1},
		} {
			t.Run(fmt.Sprintf("%s_%d/%v_fleet%d", a.name, tc.quota, tc.period, tc.fleet), func(t *testing.T) {
				h := newFBHarness(t, defaultOutageSettings(), func() int64 { return tc.fleet })
				phase := tc.period * 3 / 10
				h.clk.Advance(phase) // the outage starts inside a window
				h.primary.set(true)
				b := windowBucket(alg, tc.quota, tc.period)
				const periods = 6
				deps := saturate(t, h, b, periods*tc.period)
				share := tc.quota / tc.fleet
				// The same demand on the algorithm itself (the shared
				// bucket, here the local store) at a quota of the share.
				ref := newFBHarness(t, defaultOutageSettings(), func() int64 { return 1 })
				ref.clk.Advance(phase)
				rb := b
				rb.Burst, rb.Rate = share, share
				want := saturate(t, ref, rb, periods*tc.period)
				most := overQuota(alg, tc.period.Microseconds(), phase.Microseconds(), deps)
				t.Logf("%d (reference %d) departures in %d periods; the most in a window %d of the share %d (%.2f)",
					len(deps), len(want), periods, most, share, float64(most)/float64(share))
				if most > share {
					t.Errorf("a window held %d, over the replica's share %d of the quota", most, share)
				}
				if len(deps) < len(want) {
					t.Errorf("%d departures in %d periods, where the algorithm itself at the share's quota allows %d: the share is not used",
						len(deps), periods, len(want))
				}
			})
		}
	}
}

// TestFallbackWindowAfterSharedQueue: a window bucket's limiter made in
// an outage starts from the requests this replica booked in the shared
// bucket's windows, so that with them it keeps to its share: in the
// window of the switch it sends only what its shared requests left of
// it, and in a window its shared waiters are booked in, the rest.
func TestFallbackWindowAfterSharedQueue(t *testing.T) {
	for _, a := range windowAlgorithms {
		t.Run(a.name, func(t *testing.T) {
			h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 2 })
			b := windowBucket(a.alg, 100, time.Second) // locally 50
			h.clk.Advance(400 * time.Millisecond)
			var deps []int64
			for range 20 {
				r := h.reserve(t, b) // in the shared bucket, at once
				deps = append(deps, h.clk.Now().Add(r.Wait).Sub(fbEpoch).Microseconds())
			}
			h.primary.set(true)
			for {
				r := h.reserve(t, b)
				at := h.clk.Now().Add(r.Wait).Sub(fbEpoch)
				if at >= 3*time.Second {
					break
				}
				deps = append(deps, at.Microseconds())
			}
			if most := overQuota(a.alg, time.Second.Microseconds(), 0, deps); most > 50 {
				t.Errorf("this replica's shared and local requests held %d in a window, over its share of 50", most)
			}
		})
	}
	t.Run("waiters in the next window", func(t *testing.T) {
		h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 2 })
		b := windowBucket(store.FixedWindow, 100, time.Second)
		h.clk.Advance(400 * time.Millisecond)
		counts := map[int64]int{}
		for range 130 { // 100 in this window, 30 waiting for the next
			r := h.reserve(t, b)
			counts[int64(h.clk.Now().Add(r.Wait).Sub(fbEpoch)/time.Second)]++
		}
		h.primary.set(true)
		local := map[int64]int{}
		for {
			r := h.reserve(t, b)
			w := int64(h.clk.Now().Add(r.Wait).Sub(fbEpoch) / time.Second)
			if w >= 3 {
				break
			}
			local[w]++
		}
		if local[0] != 0 || counts[1]+local[1] != 50 || local[2] != 50 {
			t.Errorf("local departures per window %v beside the shared ones %v, want none in window 0, 50 in all in 1 and 2", local, counts)
		}
	})
}

// TestFallbackWindowRefundPauseAndDebt: a window bucket's local booking
// goes back when its waiter gives up, a pause holds it as the algorithm's
// own pause does, a request refused by another bucket books nothing in it,
// and what it counts is owed on the return.
func TestFallbackWindowRefundPauseAndDebt(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 2 })
	h.primary.set(true)
	b := windowBucket(store.FixedWindow, 10, time.Second) // locally 5 a window
	for range 5 {
		if r := h.reserve(t, b); r.Wait != 0 {
			t.Fatalf("a request of the local quota waits %v", r.Wait)
		}
	}
	r := h.reserve(t, b)
	if r.Wait != time.Second {
		t.Fatalf("the sixth waits %v, want the next window (1s)", r.Wait)
	}
	if err := r.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if r := h.reserve(t, b); r.Wait != time.Second {
			t.Fatalf("after the refund a request waits %v, want 1s", r.Wait)
		}
	}

	// Refused by a leaky bucket beside it: nothing is counted.
	slow := fbBucket("slow")
	slow.Interval, slow.Burst = 10*time.Second, 1
	if _, err := h.f.Reserve(context.Background(), []store.Bucket{slow}, 0); err != nil {
		t.Fatal(err)
	}
	if r, _ := h.f.Reserve(context.Background(), []store.Bucket{b, slow}, 3*time.Second); r.OK {
		t.Fatalf("a request over maxWait was booked: %+v", r)
	}
	if r := h.reserve(t, b); r.Wait != 2*time.Second {
		t.Fatalf("after a refusal a request waits %v, want the window after next (2s)", r.Wait)
	}

	// A pause of 2.5 s holds the window it ends in as well.
	h2 := newFBHarness(t, defaultOutageSettings(), func() int64 { return 2 })
	h2.primary.set(true)
	h2.reserve(t, b)
	if err := h2.f.Pause(context.Background(), []store.Bucket{b}, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if r := h2.reserve(t, b); r.Wait != 3*time.Second {
		t.Fatalf("after a pause to 2.5s a request waits %v, want the next window (3s)", r.Wait)
	}

	// Return: the window's count (3 in this window) is owed once.
	h3 := newFBHarness(t, defaultOutageSettings(), func() int64 { return 2 })
	h3.primary.set(true)
	for range 3 {
		h3.reserve(t, b)
	}
	h3.returnNow()
	h3.reserve(t, b)
	h3.reserve(t, b)
	h3.primary.mu.Lock()
	costs := h3.primary.costs
	h3.primary.mu.Unlock()
	if len(costs) != 2 || costs[0][0] != 1+3 || costs[1][0] != 1 {
		t.Fatalf("costs booked in Redis = %v, want [[4] [1]]: the local count once", costs)
	}
}

// TestFallbackWindowCostAndResize: a cost above the local quota goes in
// quota-sized parts in consecutive windows, and a fleet that shrinks
// raises the local quota, keeping what is counted.
func TestFallbackWindowCostAndResize(t *testing.T) {
	fleet := int64(4)
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return fleet })
	h.primary.set(true)
	b := windowBucket(store.FixedWindow, 10, time.Second) // locally 2 a window
	big := b
	big.Cost = 5
	if r := h.reserve(t, big); r.Wait != 2*time.Second {
		t.Fatalf("cost 5 at 2 a window waits %v, want 2s (parts of 2, 2, 1)", r.Wait)
	}
	if r := h.reserve(t, b); r.Wait != 2*time.Second {
		t.Fatalf("the next request waits %v, want 2s (the third window's second unit)", r.Wait)
	}
	if r := h.reserve(t, b); r.Wait != 3*time.Second {
		t.Fatalf("the next request waits %v, want 3s", r.Wait)
	}
	fleet = 2 // locally 5 a window, the 2 counted in this one kept
	h.clk.Advance(probeEvery / 2)
	for i := range 3 {
		if r := h.reserve(t, b); r.Wait != 0 {
			t.Fatalf("request %d after the resize waits %v, want 0", i, r.Wait)
		}
	}
	if r := h.reserve(t, b); r.Wait != time.Second-probeEvery/2 {
		t.Fatalf("the sixth of the window waits %v, want the next window", r.Wait)
	}
}
