package throttle

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/redistest"
)

func TestFeedbackFor(t *testing.T) {
	b := bucket{key: "k", rule: "r", interval: 10 * time.Millisecond, burst: 5, cost: 1} // 100/s
	remaining := int64(14)                                                               // of 100: as feedbackFor reckons it, not a constant
	tests := []struct {
		name string
		sig  Signal
		want feedback
	}{
		{name: "a plain response asks nothing", sig: Signal{}, want: feedback{}},
		{name: "a 429 slows down", sig: Signal{Limited: true}, want: feedback{slow: cut{factor: slowOnLimited, cooldown: slowCooldown, fromFree: true}}},
		{
			name: "a 429 reporting its quota cuts deeper from the rule, less deep from a held rate",
			sig:  Signal{Limited: true, Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: 0, HasRemaining: true}}},
			want: feedback{slow: cut{factor: slowOnLimitedReported, heldFactor: slowOnLimitedHeld, cooldown: slowCooldown, fromFree: true}},
		},
		{
			name: "a quota nearly spent brakes gently, once per window",
			sig:  Signal{Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: 4, HasRemaining: true}}},
			want: feedback{slow: cut{factor: 1 - maxSoftCut/5, cooldown: defaultQuotaWindow + slowCooldown, backdate: slowCooldown}},
		},
		{
			name: "plenty remaining asks for the largest lift, once per window",
			sig:  Signal{Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: 60, HasRemaining: true, Reset: 500 * time.Millisecond, HasReset: true}}},
			want: feedback{lift: lift{share: maxLift, cooldown: defaultQuotaWindow + slowCooldown, backdate: slowCooldown}},
		},
		{
			name: "a lift is the excess over its threshold, once per the longest window",
			sig: Signal{Quotas: []Quota{
				{Limit: 100, HasLimit: true, Remaining: remaining, HasRemaining: true, Window: 2 * time.Second},
				{Limit: 1000, HasLimit: true, Remaining: 500, HasRemaining: true, Window: time.Minute},
			}},
			want: feedback{lift: lift{share: liftGain * (float64(remaining)/100 - liftFromShare), cooldown: time.Minute + slowCooldown, backdate: slowCooldown}},
		},
		{
			name: "between the brake and the lift nothing is asked",
			sig:  Signal{Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: 8, HasRemaining: true}}},
			want: feedback{},
		},
		{
			name: "one quota without headroom, or without a limit, vetoes a lift",
			sig: Signal{Quotas: []Quota{
				{Limit: 100, HasLimit: true, Remaining: 60, HasRemaining: true},
				{Remaining: 60, HasRemaining: true},
			}},
			want: feedback{},
		},
		{
			name: "a success naming a Retry-After is no ground for a lift",
			sig:  Signal{RetryAfter: time.Second, HasRetryAfter: true, Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: 60, HasRemaining: true}}},
			want: feedback{},
		},
		{
			name: "fewer remaining than the bucket could admit before the reset spreads them",
			sig:  Signal{Quotas: []Quota{{Limit: 1000, HasLimit: true, Remaining: 200, HasRemaining: true, Reset: 10 * time.Second, HasReset: true}}},
			want: feedback{spread: 200, spreadIn: 10 * time.Second},
		},
		{
			name: "nothing remaining brakes hardest, after the short cooldown, and spreads nothing",
			sig:  Signal{Quotas: []Quota{{Limit: 1000, HasLimit: true, Remaining: 0, HasRemaining: true, Reset: 10 * time.Second, HasReset: true}}},
			want: feedback{slow: cut{factor: 1 - maxSoftCut, cooldown: 2 * slowCooldown, backdate: slowCooldown}},
		},
		{
			name: "the tightest of several quotas wins",
			sig: Signal{Quotas: []Quota{
				{Name: "a", Remaining: 500, HasRemaining: true, Reset: 10 * time.Second, HasReset: true},
				{Name: "b", Remaining: 20, HasRemaining: true, Reset: 2 * time.Second, HasReset: true},
			}},
			want: feedback{spread: 20, spreadIn: 2 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := feedbackFor(tt.sig, []bucket{b}); got != tt.want {
				t.Fatalf("feedbackFor = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAdaptLocal(t *testing.T) {
	const (
		sec   = int64(time.Second)
		iv    = int64(10 * time.Millisecond) // 100/s
		burst = 5
	)
	now := int64(1_000) * sec
	rateAt := func(a adaptation, has bool, at int64) float64 {
		if !has {
			return 100
		}
		return 1e9 / float64(a.intervalAt(iv, at, 1e9))
	}

	hard := feedback{slow: cut{factor: slowOnLimited, cooldown: slowCooldown, fromFree: true}}
	brake := func(remaining int64) feedback {
		return feedbackFor(Signal{Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: remaining, HasRemaining: true}}}, nil)
	}
	t.Run("a 429 cuts the rate, which climbs back to the rule", func(t *testing.T) {
		_, a, has := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, hard)
		if got := rateAt(a, has, now); got < 69.9 || got > 70.1 {
			t.Fatalf("rate after a 429 = %.2f/s, want 70", got)
		}
		if got := rateAt(a, has, now+5*sec); got < 79.9 || got > 80.1 {
			t.Fatalf("rate 5 s later = %.2f/s, want ≈ 80 (2/s recovery)", got)
		}
		if got := a.intervalAt(iv, now+15*sec, 1e9); got != iv {
			t.Fatalf("interval 15 s later = %d, want the rule's %d", got, iv)
		}
	})
	t.Run("a hard cut holds from the next free slot, and counts its cooldown from there", func(t *testing.T) {
		// Paused for a second: the next slot is then, burst-1 intervals
		// before the TAT.
		tat := now + sec + (burst-1)*iv
		_, a, has := adaptLocal(tat, adaptation{}, false, now, iv, burst, 1e9, hard)
		if a.t0 != now+sec {
			t.Fatalf("t0 = now%+d ms, want the pause's end", (a.t0-now)/1e6)
		}
		if got := rateAt(a, has, now+sec); got < 69.9 || got > 70.1 {
			t.Fatalf("rate at the pause's end = %.2f/s, want 70: no climb during the pause", got)
		}
		// A stale 429 answering a slot booked before the pause changes
		// nothing, even after the short cooldown.
		if _, a2, _ := adaptLocal(tat, a, has, now+500*int64(time.Millisecond), iv, burst, 1e9, hard); a2 != a {
			t.Fatalf("a 429 during the pause cut again: %+v → %+v", a, a2)
		}
		// The anchor never leaves the rate before it below half of r0.
		_, a3, _ := adaptLocal(now+100*sec, adaptation{}, false, now, iv, burst, 1e9, hard)
		if got := rateAt(a3, true, now); got < 34.9 {
			t.Fatalf("rate now under a long pause = %.2f/s, want ≥ 35", got)
		}
	})
	t.Run("hard cuts come at most once per cooldown", func(t *testing.T) {
		_, a, has := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, hard)
		_, a2, has2 := adaptLocal(0, a, has, now+int64(slowCooldown)/2, iv, burst, 1e9, hard)
		if a2 != a || !has2 {
			t.Fatalf("a second 429 within the cooldown changed the adaptation: %+v → %+v", a, a2)
		}
		_, a3, _ := adaptLocal(0, a, has, now+int64(slowCooldown), iv, burst, 1e9, hard)
		if got := rateAt(a3, true, now+int64(slowCooldown)); got > 50 {
			t.Fatalf("rate after a second cut = %.2f/s, want ≈ 0.7² of 100", got)
		}
	})
	t.Run("brakes: in proportion, once per window, never holding off a hard cut", func(t *testing.T) {
		_, a, has := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, brake(4))
		if got := rateAt(a, has, now); got < 97.9 || got > 98.1 {
			t.Fatalf("rate after a brake at 4 remaining = %.2f/s, want 98", got)
		}
		at := now + 900*int64(time.Millisecond)
		if _, a2, _ := adaptLocal(0, a, has, at, iv, burst, 1e9, brake(1)); a2 != a {
			t.Fatalf("a brake within the window changed the adaptation: %+v → %+v", a, a2)
		}
		at = now + sec
		_, a2, _ := adaptLocal(0, a, has, at, iv, burst, 1e9, brake(1))
		want := rateAt(a, true, at) * (1 - maxSoftCut*4/5)
		if got := rateAt(a2, true, at); got < want-0.1 || got > want+0.1 {
			t.Fatalf("rate after a brake at 1 remaining a window later = %.2f/s, want %.2f", got, want)
		}
		_, a3, _ := adaptLocal(0, a2, true, at+int64(time.Millisecond), iv, burst, 1e9, hard)
		if a3 == a2 {
			t.Fatal("a 429 just after a brake was held off")
		}
	})
	t.Run("the rate never falls below the floor", func(t *testing.T) {
		a, has := adaptation{}, false
		at := now
		for range 100 {
			_, a, has = adaptLocal(0, a, has, at, iv, burst, 1e9, feedback{slow: cut{factor: 0.5, cooldown: slowCooldown}})
			at += int64(slowCooldown)
		}
		if got := rateAt(a, has, at); got < 100*minRateFraction {
			t.Fatalf("rate = %.3f/s, below the floor", got)
		}
	})
	t.Run("a lift raises a cut bucket by the server's unused share, once per window", func(t *testing.T) {
		up := func(share float64) feedback {
			return feedback{lift: lift{share: share, cooldown: defaultQuotaWindow + slowCooldown, backdate: slowCooldown}}
		}
		_, a, has := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, hard)
		// Within the window after the cut the reading does not show it yet.
		if _, a2, _ := adaptLocal(0, a, has, now+sec, iv, burst, 1e9, up(0.05)); a2 != a {
			t.Fatalf("a lift within the cut's window changed the adaptation: %+v → %+v", a, a2)
		}
		at := now + sec + int64(slowCooldown)
		_, a2, has2 := adaptLocal(0, a, has, at, iv, burst, 1e9, up(0.05))
		want := rateAt(a, true, at) + 5
		if got := rateAt(a2, has2, at); got < want-0.1 || got > want+0.1 {
			t.Fatalf("rate after a lift of 5 %% = %.2f/s, want %.2f", got, want)
		}
		if got := rateAt(a2, has2, at+sec); got < want+1.9 || got > want+2.1 {
			t.Fatalf("rate a second after the lift = %.2f/s, want the slow recovery on from it, %.2f", got, want+2)
		}
		// A hard cut may follow at once; another lift only a window later.
		if _, a3, _ := adaptLocal(0, a2, has2, at+int64(time.Millisecond), iv, burst, 1e9, hard); a3 == a2 {
			t.Fatal("a 429 just after a lift was held off")
		}
		if _, a3, _ := adaptLocal(0, a2, has2, at+900*int64(time.Millisecond), iv, burst, 1e9, up(0.05)); a3 != a2 {
			t.Fatal("a second lift within the window")
		}
		// A lift past the rule ends the adaptation; none touches a bucket
		// that is not held, or held by a spread.
		if _, _, has3 := adaptLocal(0, a2, has2, at+20*sec, iv, burst, 1e9, up(maxLift)); has3 {
			t.Fatal("a lift past the rule left the bucket adapted")
		}
		if _, _, has3 := adaptLocal(0, adaptation{}, false, at, iv, burst, 1e9, up(maxLift)); has3 {
			t.Fatal("a lift adapted a bucket that was not held")
		}
		tat, sp, hasSp := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, feedback{spread: 20, spreadIn: 4 * time.Second})
		if _, sp2, _ := adaptLocal(tat, sp, hasSp, now+3*sec, iv, burst, 1e9, up(maxLift)); sp2 != sp {
			t.Fatalf("a lift changed a spread: %+v → %+v", sp, sp2)
		}
	})
	t.Run("a spread admits exactly what remains before the reset", func(t *testing.T) {
		tat, a, has := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, feedback{spread: 50, spreadIn: 10 * time.Second})
		if !has {
			t.Fatal("no adaptation")
		}
		admitted := 0
		for at := now; at < now+10*sec; at += int64(time.Millisecond) {
			cur := a.intervalAt(iv, at, 1e9)
			if gcraAllowAt(tat, at, cur, burst, 1) <= at {
				tat = gcraBook(tat, at, cur, 1)
				admitted++
			}
		}
		if admitted != 50 {
			t.Fatalf("admitted %d before the reset, want the 50 that remain", admitted)
		}
		if got := a.intervalAt(iv, now+10*sec, 1e9); got != iv {
			t.Fatalf("after the reset the interval is %d, want the rule's", got)
		}
	})
	t.Run("a spread never loosens", func(t *testing.T) {
		tat0 := now + 3*sec
		tat, _, has := adaptLocal(tat0, adaptation{}, false, now, iv, burst, 1e9, feedback{spread: 1000, spreadIn: time.Second})
		if has || tat != tat0 {
			t.Fatalf("a generous spread changed the bucket: tat %d → %d, adaptation %v", tat0, tat, has)
		}
	})
}

func TestTransportSlowsDownOnLowRemaining(t *testing.T) {
	tr, err := New(nil, WithRules(Rule{Name: "r", Limit: Limit{Rate: 100, Period: time.Second, Burst: 1}}), WithHeadroom(0))
	if err != nil {
		t.Fatal(err)
	}
	bs := []bucket{{key: "r", rule: "r", interval: 10 * time.Millisecond, burst: 1, cost: 1}}
	h := http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"1"}}
	tr.listen(t.Context(), bs, &http.Response{StatusCode: 200, Header: h})
	ls := tr.store.(*localStore)
	if _, ok := ls.adapts["r"]; !ok {
		t.Fatal("the bucket did not slow down on a nearly spent quota")
	}
}

// TestAdaptRedisSameAsLocal runs sequences of feedback through localStore
// (fake clock) and adapt.lua (the same times passed as the script's now)
// and requires the same TAT and adaptation after every step: adapt.lua is
// adaptLocal in integer microseconds.
func TestAdaptRedisSameAsLocal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	b := bucket{key: "a", rule: "a", interval: 10 * time.Millisecond, burst: 5, cost: 1} // 100/s
	hard := feedback{slow: cut{factor: slowOnLimited, cooldown: slowCooldown, fromFree: true}}
	soft := func(remaining int64, window time.Duration) feedback {
		return feedbackFor(Signal{Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: remaining, HasRemaining: true, Window: window}}}, []bucket{b})
	}
	type step struct {
		advance time.Duration
		f       feedback
		reserve int // reservations to book after the feedback
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "a hard cut, then cuts only after its cooldown", steps: []step{
			{f: hard, reserve: 3},
			{advance: 100 * time.Millisecond, f: hard},
			{advance: 200 * time.Millisecond, f: hard, reserve: 2},
			{advance: 2 * time.Second, reserve: 1},
		}},
		{name: "brakes once per window, the server's or a second", steps: []step{
			{f: soft(3, 0)},
			{advance: 500 * time.Millisecond, f: soft(1, 0)},
			{advance: 600 * time.Millisecond, f: soft(1, 0), reserve: 2},
			{advance: 1500 * time.Millisecond, f: soft(2, 2*time.Second)},
			{advance: 1500 * time.Millisecond, f: soft(2, 2*time.Second)},
			{advance: 600 * time.Millisecond, f: soft(2, 2*time.Second), reserve: 1},
		}},
		{name: "a hard cut follows a brake after the short cooldown", steps: []step{
			{f: soft(4, 0)},
			{advance: 100 * time.Millisecond, f: hard},
			{advance: 200 * time.Millisecond, f: hard},
			{advance: 100 * time.Millisecond, f: soft(0, 0)},
			{advance: 300 * time.Millisecond, f: soft(0, 0), reserve: 4},
		}},
		{name: "a reported 429 cuts deeper from the rule, less from a held rate", steps: []step{
			{f: feedbackFor(Signal{Limited: true, Quotas: []Quota{{Limit: 100, HasLimit: true, HasRemaining: true}}}, []bucket{b}), reserve: 2},
			{advance: 400 * time.Millisecond, f: feedbackFor(Signal{Limited: true, Quotas: []Quota{{Limit: 100, HasLimit: true, HasRemaining: true}}}, []bucket{b}), reserve: 1},
		}},
		{name: "lifts after a cut, once per window, up to the rule", steps: []step{
			{f: hard, reserve: 3},
			{advance: 600 * time.Millisecond, f: soft(40, 0)},
			{advance: 700 * time.Millisecond, f: soft(17, 0), reserve: 2},
			{advance: 300 * time.Millisecond, f: soft(30, 0)},
			{advance: time.Second, f: soft(13, 2*time.Second), reserve: 1},
			{advance: 1300 * time.Millisecond, f: soft(60, 0)},
			{advance: 2300 * time.Millisecond, f: soft(60, 0)},
			{advance: 1300 * time.Millisecond, f: soft(60, 0), reserve: 2},
			{advance: 1300 * time.Millisecond, f: soft(60, 0)},
		}},
		{name: "a spread after a cut", steps: []step{
			{f: hard, reserve: 5},
			{advance: 50 * time.Millisecond, f: feedback{spread: 20, spreadIn: 4 * time.Second}, reserve: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := redisCtx(t)
			start := time.Unix(1_700_000_000, 0)
			lclk, rclk := fakeclock.New(start), fakeclock.New(start)
			local := newLocalStore(lclk)
			remote := redisStoreAt(rdb, testNamespace(t), rclk)
			bs := []bucket{b}
			for i, st := range tt.steps {
				lclk.Advance(st.advance)
				rclk.Advance(st.advance)
				if !st.f.empty() {
					if err := local.adapt(ctx, bs, st.f); err != nil {
						t.Fatalf("step %d: local adapt: %v", i, err)
					}
					if err := remote.adapt(ctx, bs, st.f); err != nil {
						t.Fatalf("step %d: redis adapt: %v", i, err)
					}
				}
				for range st.reserve {
					if _, err := local.reserve(ctx, bs, time.Minute); err != nil {
						t.Fatalf("step %d: local reserve: %v", i, err)
					}
					if _, err := remote.reserve(ctx, bs, time.Minute); err != nil {
						t.Fatalf("step %d: redis reserve: %v", i, err)
					}
				}
				v, err := rdb.Get(ctx, remote.key(&b)).Result()
				if err != nil {
					t.Fatalf("step %d: GET: %v", i, err)
				}
				local.mu.Lock()
				ltat := local.tats[b.key]
				la, lhas := local.adapts[b.key]
				local.mu.Unlock()
				now := lclk.Now().UnixNano()
				if lhas && now >= la.until {
					lhas = false
				}
				rtat, ra, rhas := parseBucketValue(t, v, now/1000)
				// Intervals in force are whole ns here and whole µs in
				// Redis, so rates and times agree to a few parts in 1e4,
				// and the times that decide cooldowns exactly.
				if d := ltat/1000 - rtat; d < -100 || d > 100 {
					t.Errorf("step %d: TAT local %d µs, redis %d µs", i, ltat/1000, rtat)
				}
				if lhas != rhas {
					t.Fatalf("step %d: adapted local %v (%+v), redis %v (%q)", i, lhas, la, rhas, v)
				}
				if !lhas {
					continue
				}
				if math.Abs(la.rate0-ra.rate0) > 1e-3*math.Abs(la.rate0)+1e-6 || la.t0/1000 != ra.t0 ||
					math.Abs(la.slope-ra.slope) > 1e-3*max(la.slope, 1) || (la.until/1000-ra.until) > 20000 || (la.until/1000-ra.until) < -20000 {
					t.Errorf("step %d: adaptation local %+v (ns), redis %+v (µs)", i, la, ra)
				}
			}
		})
	}
}

// parseBucketValue decodes a bucket's value in Redis (bucket.lua's format)
// and reports its adaptation when one is in force at now (µs).
func parseBucketValue(t *testing.T, v string, now int64) (int64, adaptation, bool) {
	t.Helper()
	f := strings.Fields(v)
	num := func(s string) float64 {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("bucket value %q: %v", v, err)
		}
		return x
	}
	tat := int64(num(f[0]))
	if len(f) == 1 {
		return tat, adaptation{}, false
	}
	if len(f) != 5 {
		t.Fatalf("bucket value %q: want 1 or 5 fields", v)
	}
	a := adaptation{rate0: num(f[1]), t0: int64(num(f[2])), slope: num(f[3]), until: int64(num(f[4]))}
	return tat, a, a.until > now
}

func TestPauseFor(t *testing.T) {
	exhausted := func(reset time.Duration) []Quota {
		return []Quota{{Limit: 100, HasLimit: true, Remaining: 0, HasRemaining: true, Reset: reset, HasReset: true}}
	}
	tests := []struct {
		name      string
		sig       Signal
		wantPause time.Duration
		wantOK    bool
	}{
		{name: "nothing said", sig: Signal{}},
		{name: "a 429's Retry-After pauses", sig: Signal{Limited: true, RetryAfter: time.Second, HasRetryAfter: true, Quotas: exhausted(time.Second)}, wantPause: time.Second, wantOK: true},
		{name: "a success with nothing left for a second does not", sig: Signal{Quotas: exhausted(time.Second)}},
		{name: "a success with nothing left for longer pauses until the reset", sig: Signal{Quotas: exhausted(5 * time.Second)}, wantPause: 5 * time.Second, wantOK: true},
		{name: "a rejection with nothing left for a second pauses", sig: Signal{Limited: true, Quotas: exhausted(time.Second)}, wantPause: time.Second, wantOK: true},
		{name: "a success naming a Retry-After pauses", sig: Signal{RetryAfter: 300 * time.Millisecond, HasRetryAfter: true}, wantPause: 300 * time.Millisecond, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := pauseFor(tt.sig); got != tt.wantPause || ok != tt.wantOK {
				t.Fatalf("pauseFor = %v, %v; want %v, %v", got, ok, tt.wantPause, tt.wantOK)
			}
		})
	}
}

// TestFeedbackPauseHoldsBookedWaiters: a waiter of this process that booked
// its slot before a pause came does not leave on it, into the server's
// rejection, but books again and leaves after the pause.
func TestFeedbackPauseHoldsBookedWaiters(t *testing.T) {
	clk := fakeclock.New(epoch)
	sent := make(chan time.Time, 4)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		sent <- clk.Now()
		return okBase(r)
	})
	tr := mustNew(t, base, WithClock(clk), WithHeadroom(0), WithRetry(RetryPolicy{MaxAttempts: 1}), WithRules(Rule{
		Name: "r", Limit: Limit{Rate: 10, Period: time.Second, Burst: 1},
	}))
	if err := roundTrip(tr, newReq(t, context.Background(), http.MethodGet, "http://x/")); err != nil {
		t.Fatal(err)
	}
	<-sent
	done := make(chan error, 1)
	go func() { done <- roundTrip(tr, newReq(t, context.Background(), http.MethodGet, "http://x/")) }()
	clk.WaitTimers(1) // booked at epoch+100ms, asleep
	bs, err := tr.buckets(newReq(t, context.Background(), http.MethodGet, "http://x/"))
	if err != nil {
		t.Fatal(err)
	}
	tr.listen(context.Background(), bs, &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}})
	clk.Advance(100 * time.Millisecond) // its slot, inside the pause
	// It books again and sleeps until the pause's end; leaving instead
	// would show on sent.
	for clk.Timers() < 1 {
		select {
		case at := <-sent:
			t.Fatalf("the waiter left at epoch+%v, inside the pause", at.Sub(epoch))
		case err := <-done:
			t.Fatalf("the waiter returned %v inside the pause", err)
		case <-time.After(time.Millisecond):
		}
	}
	clk.Advance(900 * time.Millisecond)
	if at := <-sent; at.Before(epoch.Add(time.Second)) {
		t.Fatalf("the waiter left at epoch+%v, before the pause's end", at.Sub(epoch))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
