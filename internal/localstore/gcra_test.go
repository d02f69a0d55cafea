package localstore

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// t0 is an arbitrary Unix-nanosecond instant (late 2023) from which the GCRA
// tables count, so that offsets stay readable.
const t0 = int64(1_700_000_000_000_000_000)

// gcraStep is one request against a bucket: it arrives at now, costs cost,
// and must be allowed at wantAt (then it is booked at that time).
type gcraStep struct {
	now, cost, wantAt int64
}

func TestGCRA(t *testing.T) {
	const maxI = math.MaxInt64
	tests := []struct {
		name            string
		interval, burst int64
		steps           []gcraStep
	}{
		{
			name: "burst: B at once, the B+1th waits one interval", interval: 10, burst: 3,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0 + 10}},
		},
		{
			name: "steady state: one per interval once the burst is spent", interval: 10, burst: 2,
			steps: []gcraStep{
				{t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0 + 10}, {t0 + 10, 1, t0 + 20},
				{t0 + 20, 1, t0 + 30}, {t0 + 30, 1, t0 + 40},
			},
		},
		{
			name: "steady arrivals at the rate never wait", interval: 10, burst: 1,
			steps: []gcraStep{{t0, 1, t0}, {t0 + 10, 1, t0 + 10}, {t0 + 20, 1, t0 + 20}, {t0 + 30, 1, t0 + 30}},
		},
		{
			name: "idle bucket refills to a full burst", interval: 10, burst: 2,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0 + 1000, 1, t0 + 1000}, {t0 + 1000, 1, t0 + 1000}, {t0 + 1000, 1, t0 + 1010}},
		},
		{
			name: "cost > 1 takes cost intervals", interval: 10, burst: 5,
			steps: []gcraStep{{t0, 3, t0}, {t0, 3, t0 + 10}, {t0, 1, t0 + 20}, {t0, 5, t0 + 70}},
		},
		{
			name: "cost equal to burst goes at once on an empty bucket", interval: 10, burst: 4,
			steps: []gcraStep{{t0, 4, t0}, {t0, 4, t0 + 40}},
		},
		{
			name: "clock going backwards is never looser and never negative", interval: 10, burst: 2,
			steps: []gcraStep{
				{t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0 + 10},
				// The clock jumps back 1000: the next slot is still the one
				// after the last booking, not a fresh burst.
				{t0 - 1000, 1, t0 + 20}, {t0 - 1000, 1, t0 + 30},
			},
		},
		{
			name: "huge interval, burst 1: the second request waits (saturated, not wrapped)", interval: maxI, burst: 1,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, maxI}, {t0 + 5, 1, maxI}},
		},
		{
			name: "huge interval, burst 2: the third request waits", interval: maxI / 2, burst: 2,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0, 1, maxI - maxI/2}},
		},
		{
			name: "burst MaxInt with interval 1", interval: 1, burst: maxI,
			steps: []gcraStep{{t0, 1, t0}, {t0, maxI, t0 + 1}},
		},
		{
			name: "huge cost on a huge bucket", interval: 3, burst: maxI / 2,
			// The exact TAT, t0 + 3·MaxInt64/2, saturates; the next slot
			// still lies in the past, so the request goes at once.
			steps: []gcraStep{{t0, maxI / 2, t0}, {t0, 1, t0}},
		},
		{
			name: "TAT saturated after two bookings: the third request waits", interval: 1 << 62, burst: 2,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0, 1, maxI - 1<<62}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tat int64
			for i, s := range tt.steps {
				at := gcraAllowAt(tat, s.now, tt.interval, tt.burst, s.cost)
				if at != s.wantAt {
					t.Fatalf("step %d %+v: allowed at %d (now%+d), want %d (now%+d)", i, s, at, at-s.now, s.wantAt, s.wantAt-s.now)
				}
				if at < s.now {
					t.Fatalf("step %d: negative wait %d", i, at-s.now)
				}
				next := gcraBook(tat, at, tt.interval, s.cost)
				if next < tat {
					t.Fatalf("step %d: booking moved TAT back from %d to %d", i, tat, next)
				}
				tat = next
			}
		})
	}
}

// TestGCRAOracle checks the saturating arithmetic against exact big-integer
// arithmetic over random huge values: the answer must be the exact one
// whenever the exact one fits in an int64, and never wrap.
func TestGCRAOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Int64N(1000) + 1
		case 1:
			return math.MaxInt64 - rng.Int64N(1000)
		case 2:
			return int64(1) << rng.IntN(63)
		default:
			return rng.Int64N(math.MaxInt64) + 1
		}
	}
	maxBig := big.NewInt(math.MaxInt64)
	clamp := func(x *big.Int) int64 {
		if x.Cmp(maxBig) > 0 {
			return math.MaxInt64
		}
		return x.Int64()
	}
	for i := range 100_000 {
		iv, burst := pick(), pick()
		cost := rng.Int64N(burst) + 1
		now := rng.Int64N(2 * t0)
		tat := []int64{0, now, now + rng.Int64N(1<<40), pick()}[rng.IntN(4)]

		// exact: max(now, max(tat, now) - (burst-cost)·iv)
		base := big.NewInt(max(tat, now))
		slack := new(big.Int).Mul(big.NewInt(burst-cost), big.NewInt(iv))
		exact := new(big.Int).Sub(base, slack)
		if exact.Cmp(big.NewInt(now)) < 0 {
			exact.SetInt64(now)
		}
		if got, want := gcraAllowAt(tat, now, iv, burst, cost), exact.Int64(); got != want {
			t.Fatalf("case %d: gcraAllowAt(tat=%d, now=%d, iv=%d, burst=%d, cost=%d) = %d, want %d",
				i, tat, now, iv, burst, cost, got, want)
		}
		at := exact.Int64()
		book := new(big.Int).Add(big.NewInt(max(tat, at)), new(big.Int).Mul(big.NewInt(cost), big.NewInt(iv)))
		if got, want := gcraBook(tat, at, iv, cost), clamp(book); got != want {
			t.Fatalf("case %d: gcraBook(tat=%d, at=%d, iv=%d, cost=%d) = %d, want %d", i, tat, at, iv, cost, got, want)
		}
	}
}

func TestGCRAPause(t *testing.T) {
	tests := []struct {
		name            string
		tat, until      int64
		interval, burst int64
		want            int64
	}{
		{name: "empty bucket shut until then refilling", tat: 0, until: t0 + 100, interval: 10, burst: 3, want: t0 + 120},
		{name: "a later TAT is kept", tat: t0 + 500, until: t0 + 100, interval: 10, burst: 3, want: t0 + 500},
		{name: "saturates", tat: 0, until: t0, interval: math.MaxInt64, burst: 2, want: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gcraPause(tt.tat, tt.until, tt.interval, tt.burst)
			if got != tt.want {
				t.Fatalf("gcraPause = %d, want %d", got, tt.want)
			}
		})
	}
	t.Run("after a pause the next request departs at until, then one per interval", func(t *testing.T) {
		const iv, burst = 10, 3
		tat := gcraPause(0, t0+100, iv, burst)
		for i, want := range []int64{t0 + 100, t0 + 110, t0 + 120} {
			at := gcraAllowAt(tat, t0, iv, burst, 1)
			if at != want {
				t.Fatalf("request %d allowed at now%+d, want now%+d", i, at-t0, want-t0)
			}
			tat = gcraBook(tat, at, iv, 1)
		}
	})
}
