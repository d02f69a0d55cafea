package algorithm_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/algorithm"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// The sliding log keeps only its newest Quota entries (algorithm.LogBook).
// These tests hold it to what log.go proves: trimming changes no decision,
// the log never holds more than the quota however far ahead waiters book,
// and refunds on a trimmed log never let a window hold more than the
// quota.

// logStep draws one request of a trace: the time advanced (µs), the cost,
// and a pause's end (0 for none) now and then. Requests arrive faster than
// the quota drains, so waits span many periods.
func logStep(rng *rand.Rand, w algorithm.Window, now int64) (adv, cost, hold int64) {
	adv = rng.Int64N(w.Period / w.Quota)
	cost = 1 + rng.Int64N(min(w.Quota, 3))
	if rng.IntN(40) == 0 {
		hold = now + adv + rng.Int64N(2*w.Period)
	}
	return adv, cost, hold
}

// TestLogTrimDecidesAsTheWholeLog books the same trace, pauses included,
// into a log trimmed to its quota and into one that keeps every entry of
// the last period: every departure is the same, and the trimmed log never
// holds more than the quota.
func TestLogTrimDecidesAsTheWholeLog(t *testing.T) {
	t.Parallel()
	for _, q := range []int64{1, 3, 7} {
		for seed := range uint64(10) {
			t.Run(fmt.Sprintf("quota=%d/seed=%d", q, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(seed, uint64(q)))
				w := algorithm.Window{Period: 1_000_000, Quota: q}
				var trimmed, whole algorithm.Log
				var now, hold, most int64
				for i := range 2000 {
					adv, cost, h := logStep(rng, w, now)
					now += adv
					hold = max(hold, h)
					trimmed.Trim(w, now)
					whole.Trim(w, now)
					a := algorithm.LogAt(w, &trimmed, now, hold, cost)
					b := algorithm.LogAt(w, &whole, now, hold, cost)
					if a != b {
						t.Fatalf("request %d (cost %d): the trimmed log departs at %d, the whole one at %d", i, cost, a, b)
					}
					if a < now {
						t.Fatalf("request %d departs at %d, before now %d", i, a, now)
					}
					algorithm.LogBook(w, &trimmed, now, a, cost)
					for range cost {
						whole.E = append(whole.E, a)
					}
					if n := int64(len(trimmed.E)); n > q {
						t.Fatalf("request %d: the log holds %d entries, quota %d", i, n, q)
					}
					most = max(most, int64(len(whole.E)))
				}
				if most <= 2*q {
					t.Fatalf("the whole log held at most %d entries: the trace never booked periods ahead", most)
				}
			})
		}
	}
}

// TestLogRefundsKeepTheQuota books and cancels at random into a trimmed
// log, and checks on the record of the departures really kept that no
// trailing period ever holds more than the quota; the log never holds more
// than the quota, no wait is negative, and refunds do give capacity back
// (the trace departs earlier than it would without them) except on a log
// of quota 1.
func TestLogRefundsKeepTheQuota(t *testing.T) {
	t.Parallel()
	for _, q := range []int64{1, 2, 5} {
		for seed := range uint64(10) {
			t.Run(fmt.Sprintf("quota=%d/seed=%d", q, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(seed, uint64(100+q)))
				w := algorithm.Window{Period: 1_000_000, Quota: q}
				var l, noRefund algorithm.Log
				var ds []departure // booked and not cancelled
				var now, hold, found, last, lastNoRefund int64
				for i := range 1500 {
					adv, cost, h := logStep(rng, w, now)
					now += adv
					hold = max(hold, h)
					if len(ds) > 0 && rng.IntN(4) == 0 {
						// One of the latest waiters gives up: a booking
						// older than the newest Quota entries lies a period
						// or more before the newest, so it weighs on no
						// later booking and its refund changes nothing.
						k := len(ds) - 1 - rng.IntN(min(len(ds), 3))
						if d := ds[k]; d.at > now {
							found += algorithm.LogRefund(w, &l, now, d.at, d.cost)
							ds = append(ds[:k], ds[k+1:]...)
						}
					}
					l.Trim(w, now)
					at := algorithm.LogAt(w, &l, now, hold, cost)
					if at < now {
						t.Fatalf("request %d: negative wait %d", i, at-now)
					}
					algorithm.LogBook(w, &l, now, at, cost)
					ds = append(ds, departure{at, cost})
					last = at
					if n := int64(len(l.E)); n > q {
						t.Fatalf("request %d: the log holds %d entries, quota %d", i, n, q)
					}
					if n := sumIn(ds, at-w.Period, at); n > q {
						t.Fatalf("request %d: %d units in the period ending at %d, quota %d", i, n, at, q)
					}
					noRefund.Trim(w, now)
					lastNoRefund = algorithm.LogAt(w, &noRefund, now, hold, cost)
					algorithm.LogBook(w, &noRefund, now, lastNoRefund, cost)
				}
				// A log of quota 1 is always full with its one entry the
				// newest booking: it never gives a refund back.
				if q > 1 && (found == 0 || last >= lastNoRefund) {
					t.Fatalf("refunds found %d entries; last departure %d, %d without refunds: refunds gave nothing back", found, last, lastNoRefund)
				}
			})
		}
	}
}

// TestRedisSlidingLogMemoryBounded books 1000 requests of a sliding log of
// 100 a second at one instant, waits spanning ten periods, through the
// Redis store and the local one, and cancels some of the waiters: the
// sorted set holds the quota's 100 entries throughout, and its MEMORY
// USAGE is that of a log filled to the quota.
func TestRedisSlidingLogMemoryBounded(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := redisCtx(t)
	const q = 100
	start := time.Unix(1_700_000_000, 0)
	rclk, lclk := fakeclock.New(start), fakeclock.New(start)
	rs := redisstore.New(rdb, redisstore.Options{Namespace: "mem", NowMicros: func() int64 { return rclk.Now().UnixMicro() }})
	ls := localstore.New(lclk)
	b := store.Bucket{Key: "sl", Rule: "sl", Algorithm: store.SlidingLog, Burst: q, Period: time.Second, Rate: q, Interval: 10 * time.Millisecond, Cost: 1}
	key := "throttle:{mem}:sl"
	usage := func() (card, mem int64) {
		t.Helper()
		card, err := rdb.ZCard(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		mem, err = rdb.MemoryUsage(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return card, mem
	}
	var rres, lres []store.Reservation
	var atQuota int64
	for i := range 10 * q {
		r, err := rs.Reserve(ctx, []store.Bucket{b}, time.Minute)
		if err != nil || !r.OK {
			t.Fatalf("request %d: %+v, %v", i, r, err)
		}
		l, err := ls.Reserve(ctx, []store.Bucket{b}, time.Minute)
		if err != nil || l.OK != r.OK || l.Wait != r.Wait {
			t.Fatalf("request %d: local %+v, %v; redis %+v", i, l, err, r)
		}
		if want := time.Duration(i/q) * time.Second; r.Wait != want {
			t.Fatalf("request %d waits %v, want %v", i, r.Wait, want)
		}
		rres, lres = append(rres, r), append(lres, l)
		if card, mem := usage(); card > q {
			t.Fatalf("request %d: ZCARD %d > quota %d", i, card, q)
		} else if i == q-1 {
			atQuota = mem
		}
	}
	card, mem := usage()
	t.Logf("1000 requests booked over 10 periods: ZCARD %d, MEMORY USAGE %d B (%d B at the quota, before any wait)", card, mem, atQuota)
	if card != q || mem > atQuota+atQuota/4 {
		t.Fatalf("ZCARD %d, MEMORY USAGE %d B; want %d entries and about the %d B of a log at its quota", card, mem, q, atQuota)
	}
	// Waiters of the last periods give up; then the clock moves into the
	// third period and more requests book: both stores still agree.
	for _, i := range []int{999, 950, 900, 555, 420} {
		if err := rres[i].Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lres[i].Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rclk.Advance(2500 * time.Millisecond)
	lclk.Advance(2500 * time.Millisecond)
	for i := range 20 {
		r, err := rs.Reserve(ctx, []store.Bucket{b}, time.Minute)
		if err != nil || !r.OK {
			t.Fatalf("request %d after the cancels: %+v, %v", i, r, err)
		}
		l, err := ls.Reserve(ctx, []store.Bucket{b}, time.Minute)
		if err != nil || l.Wait != r.Wait {
			t.Fatalf("request %d after the cancels: local %+v, %v; redis wait %v", i, l, err, r.Wait)
		}
	}
	if card, _ := usage(); card != q {
		t.Fatalf("ZCARD %d after the cancels, want %d", card, q)
	}
}
