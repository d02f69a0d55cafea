package throttle

import (
	"net/http"
	"testing"
	"time"
)

func TestFeedbackFor(t *testing.T) {
	b := bucket{key: "k", rule: "r", interval: 10 * time.Millisecond, burst: 5, cost: 1} // 100/s
	tests := []struct {
		name string
		sig  Signal
		want feedback
	}{
		{name: "a plain response asks nothing", sig: Signal{}, want: feedback{}},
		{name: "a 429 slows down", sig: Signal{Limited: true}, want: feedback{slow: slowOnLimited}},
		{
			name: "a quota nearly spent slows down gently",
			sig:  Signal{Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: 4, HasRemaining: true}}},
			want: feedback{slow: slowOnLowRemaining},
		},
		{
			name: "plenty remaining asks nothing",
			sig:  Signal{Quotas: []Quota{{Limit: 100, HasLimit: true, Remaining: 60, HasRemaining: true, Reset: 500 * time.Millisecond, HasReset: true}}},
			want: feedback{},
		},
		{
			name: "fewer remaining than the bucket could admit before the reset spreads them",
			sig:  Signal{Quotas: []Quota{{Limit: 1000, HasLimit: true, Remaining: 200, HasRemaining: true, Reset: 10 * time.Second, HasReset: true}}},
			want: feedback{spread: 200, spreadIn: 10 * time.Second},
		},
		{
			name: "nothing remaining is a pause, not a spread",
			sig:  Signal{Quotas: []Quota{{Limit: 1000, HasLimit: true, Remaining: 0, HasRemaining: true, Reset: 10 * time.Second, HasReset: true}}},
			want: feedback{slow: slowOnLowRemaining},
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

	t.Run("a 429 cuts the rate, which climbs back to the rule", func(t *testing.T) {
		_, a, has := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, feedback{slow: slowOnLimited})
		if got := rateAt(a, has, now); got < 84 || got > 85.1 {
			t.Fatalf("rate after a 429 = %.2f/s, want ≈ 85", got)
		}
		if got := rateAt(a, has, now+5*sec); got < 94 || got > 95.1 {
			t.Fatalf("rate 5 s later = %.2f/s, want ≈ 95 (2/s recovery)", got)
		}
		if got := a.intervalAt(iv, now+8*sec, 1e9); got != iv {
			t.Fatalf("interval 8 s later = %d, want the rule's %d", got, iv)
		}
	})
	t.Run("cuts come at most once per cooldown", func(t *testing.T) {
		_, a, has := adaptLocal(0, adaptation{}, false, now, iv, burst, 1e9, feedback{slow: slowOnLimited})
		_, a2, has2 := adaptLocal(0, a, has, now+int64(slowCooldown)/2, iv, burst, 1e9, feedback{slow: slowOnLimited})
		if a2 != a || !has2 {
			t.Fatalf("a second 429 within the cooldown changed the adaptation: %+v → %+v", a, a2)
		}
		_, a3, _ := adaptLocal(0, a, has, now+int64(slowCooldown), iv, burst, 1e9, feedback{slow: slowOnLimited})
		if got := rateAt(a3, true, now+int64(slowCooldown)); got > 73 {
			t.Fatalf("rate after a second cut = %.2f/s, want ≈ 0.85² of 100", got)
		}
	})
	t.Run("the rate never falls below the floor", func(t *testing.T) {
		a, has := adaptation{}, false
		at := now
		for range 100 {
			_, a, has = adaptLocal(0, a, has, at, iv, burst, 1e9, feedback{slow: 0.5})
			at += int64(slowCooldown)
		}
		if got := rateAt(a, has, at); got < 100*minRateFraction {
			t.Fatalf("rate = %.3f/s, below the floor", got)
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
