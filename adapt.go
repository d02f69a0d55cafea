package throttle

import (
	"context"
	"time"
)

// The fleet adapts each bucket's rate to what the server says, so that a
// quota shared with consumers the fleet cannot see, or smaller than the
// configured rule, costs few rejections:
//
//   - slow down: a rate-limited response cuts the bucket's rate to
//     slowOnLimited of what it was, and a response reporting a quota nearly
//     spent (remaining ≤ 5 % of its limit) to slowOnLowRemaining, before any
//     rejection. Cuts come at most once per slowCooldown, however many
//     replicas report them, and the rate climbs back by recoverPerSecond of
//     the rule's rate each second, never below minRateFraction of it.
//   - spread: a response reporting R units remaining until a reset X away,
//     fewer than the bucket could still admit in X, holds the bucket to R
//     in X (one at once, then one every X/R, no burst) until the reset.
//
// Both only ever tighten a bucket; the rule stays the ceiling. They live in
// the store beside the bucket, so the whole fleet adapts together.
const (
	slowOnLimited      = 0.85
	slowOnLowRemaining = 0.95
	slowCooldown       = 250 * time.Millisecond
	recoverPerSecond   = 0.02
	minRateFraction    = 0.01
	lowRemainingShare  = 0.05
	minSpreadReset     = time.Second
)

// feedback is what a response asks of a request's buckets.
type feedback struct {
	// slow multiplies the bucket's rate (0 < slow < 1); 0 means no change.
	slow float64
	// spread, with spreadIn > 0, holds the bucket to spread units of cost
	// within spreadIn.
	spread   int64
	spreadIn time.Duration
}

func (f feedback) empty() bool { return f.slow == 0 && f.spreadIn <= 0 }

// feedbackFor works out what sig asks of buckets bs. It returns an empty
// feedback when nothing needs the store, which is the common case: most
// responses are neither rejected nor close to a limit.
func feedbackFor(sig Signal, bs []bucket) feedback {
	var f feedback
	if sig.Limited {
		f.slow = slowOnLimited
	}
	for _, q := range sig.Quotas {
		if !q.HasRemaining {
			continue
		}
		if q.HasLimit && q.Limit > 0 && float64(q.Remaining) <= max(1, lowRemainingShare*float64(q.Limit)) && f.slow == 0 {
			f.slow = slowOnLowRemaining
		}
		if !q.HasReset || q.Reset <= minSpreadReset || q.Remaining == 0 {
			// Nothing left until the reset is a pause, which Signal.Wait
			// reports and listen applies. A reset within a second is
			// no ground for a spread: resets come in whole seconds, so
			// "1" means anywhere in the next second, and a strict
			// sliding window reports there when its next slot frees, not
			// when the quota refills; spreading what remains over it
			// held a fleet at a few requests a second while slots freed
			// every few milliseconds. Running out of such a quota costs
			// a pause of at most that second, and the low-water
			// slowdown comes first.
			continue
		}
		// Skip what no bucket could exceed anyway: in X, a bucket admits
		// at most X/interval + burst.
		for _, b := range bs {
			if q.Remaining < int64(q.Reset/b.interval)+b.burst {
				if f.spreadIn <= 0 || q.Remaining*int64(f.spreadIn) < f.spread*int64(q.Reset) {
					f.spread, f.spreadIn = q.Remaining, q.Reset
				}
				break
			}
		}
	}
	return f
}

// adaptLocal applies f to one bucket of rule interval iv and burst, with
// TAT tat and adaptation a (has false when none), at time now in units of
// unitsPerSecond. It returns the new TAT and adaptation. It is the
// reference for adapt.lua.
func adaptLocal(tat int64, a adaptation, has bool, now, iv, burst int64, unitsPerSecond float64, f feedback) (int64, adaptation, bool) {
	ruleRate := unitsPerSecond / float64(iv)
	if has && now >= a.until {
		has = false
	}
	if f.slow > 0 && (!has || float64(now-a.t0) >= slowCooldown.Seconds()*unitsPerSecond) {
		cur := ruleRate
		if has {
			cur = unitsPerSecond / float64(a.intervalAt(iv, now, unitsPerSecond))
		}
		r0 := max(cur*f.slow, ruleRate*minRateFraction)
		slope := ruleRate * recoverPerSecond
		a = adaptation{rate0: r0, t0: now, slope: slope, until: now + int64((ruleRate-r0)/slope*unitsPerSecond)}
		has = true
	}
	if f.spreadIn > 0 && f.spread > 0 {
		span := int64(f.spreadIn.Seconds() * unitsPerSecond)
		cur := iv
		if has {
			cur = a.intervalAt(iv, now, unitsPerSecond)
		}
		spreadIv := span / f.spread
		// Tighten only: the bucket could admit more than spread in span.
		if believed := max(now+span-max(tat, now), 0)/cur + burst; f.spread < believed && spreadIv > cur {
			a = adaptation{rate0: unitsPerSecond / float64(spreadIv), t0: now, until: now + span}
			has = true
			tat = max(tat, satAdd(now, satMul(spreadIv, burst-1)))
		}
	}
	return tat, a, has
}

func (s *localStore) adapt(_ context.Context, bs []bucket, f feedback) error {
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bs {
		a, has := s.adapts[b.key]
		tat, a, has := adaptLocal(s.tats[b.key], a, has, now, int64(b.interval), b.burst, 1e9, f)
		s.tats[b.key] = tat
		if has {
			s.adapts[b.key] = a
		} else {
			delete(s.adapts, b.key)
		}
	}
	return nil
}
