package throttle

import (
	"context"
	"time"
)

// The fleet adapts each bucket's rate to what the server says, so that a
// quota shared with consumers the fleet cannot see, or smaller than the
// configured rule, costs few rejections (docs/FEEDBACK.md has the
// measurements behind every constant):
//
//   - brake: a response reporting a quota nearly spent (fewer than
//     lowRemainingShare of its limit remaining, 1 ≤ R < 5 of 100) cuts the
//     rate in proportion to how little is left, from nothing at the
//     threshold to 8 % at one left. The brake is the fleet's controller
//     near a shared quota: it acts before any rejection, and at most once
//     per quota window (the server's w, else defaultQuotaWindow), because
//     a cut shows in what remains only once the window has turned over;
//     braking again before that counts the same excess twice. A report of
//     nothing left on a success brakes by maxSoftCut, at most once per
//     slowCooldown: the next request would be rejected, but a reset of a
//     second or less is no ground for a pause (see pauseFor).
//   - hard cut: a rate-limited response cuts the rate to slowOnLimited, at
//     most once per slowCooldown, however many replicas report it, and
//     from the bucket's next free slot on: after the pause the rejection
//     asked for, not during it, and the answers to requests booked before
//     it count for nothing (they repeat what the cut already heard). It is
//     deep because a rejection means the fleet outran the quota by an
//     unknown margin, and each further rejection costs the fleet a pause.
//   - recover: after any cut the rate climbs back by recoverPerSecond of
//     the rule's rate each second, never below minRateFraction of it.
//   - spread: a response reporting R units remaining until a reset X away,
//     fewer than the bucket could still admit in X, holds the bucket to R
//     in X (one at once, then one every X/R, no burst) until the reset.
//
// The cooldowns are separate but share one timestamp in the bucket, the
// adaptation's t0, from which the next cut's cooldown counts: a brake
// places its t0 slowCooldown in the past (any point of the rate's line
// serves as its reference), so a hard cut may follow it at once, and a
// brake's cooldown is its window plus slowCooldown: a window after the last
// brake, a little more after a hard cut.
//
// All of them only ever tighten a bucket; the rule stays the ceiling. They
// live in the store beside the bucket, so the whole fleet adapts together.
const (
	slowOnLimited      = 0.7
	slowCooldown       = 250 * time.Millisecond
	lowRemainingShare  = 0.05
	maxSoftCut         = 0.10
	defaultQuotaWindow = time.Second
	recoverPerSecond   = 0.02
	minRateFraction    = 0.01
	minSpreadReset     = time.Second
)

// cut asks the store to multiply a bucket's rate by factor (0 < factor < 1;
// 0 means no cut), unless the bucket's last cut (its adaptation's t0) lies
// less than cooldown in the past. The cut's own t0 is placed backdate
// before now: see the constants above.
//
// With fromFree set, the cut's rate holds from the bucket's next free slot
// on, and its t0 lies there: see adaptLocal.
type cut struct {
	factor   float64
	cooldown time.Duration
	backdate time.Duration
	fromFree bool
}

// stronger reports whether c cuts deeper than d, or as deep sooner.
func (c cut) stronger(d cut) bool {
	if d.factor == 0 {
		return c.factor > 0
	}
	return c.factor > 0 && (c.factor < d.factor || (c.factor == d.factor && c.cooldown < d.cooldown))
}

// feedback is what a response asks of a request's buckets.
type feedback struct {
	// slow cuts the bucket's rate; the zero cut changes nothing.
	slow cut
	// spread, with spreadIn > 0, holds the bucket to spread units of cost
	// within spreadIn.
	spread   int64
	spreadIn time.Duration
}

func (f feedback) empty() bool { return f.slow.factor == 0 && f.spreadIn <= 0 }

// feedbackFor works out what sig asks of buckets bs. It returns an empty
// feedback when nothing needs the store, which is the common case: most
// responses are neither rejected nor close to a limit.
func feedbackFor(sig Signal, bs []bucket) feedback {
	var f feedback
	if sig.Limited {
		f.slow = cut{factor: slowOnLimited, cooldown: slowCooldown, fromFree: true}
	}
	for _, q := range sig.Quotas {
		if !q.HasRemaining {
			continue
		}
		if c := brakeFor(q); c.stronger(f.slow) {
			f.slow = c
		}
		if !q.HasReset || q.Reset <= minSpreadReset || q.Remaining == 0 {
			// Nothing left until the reset is a pause (Signal.Wait,
			// applied by listen) or, within a second, a cut. A reset
			// within a second is no ground for a spread: resets come in
			// whole seconds, so "1" means anywhere in the next second,
			// and a strict sliding window reports there when its next
			// slot frees, not when the quota refills; spreading what
			// remains over it held a fleet at a few requests a second
			// while slots freed every few milliseconds.
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

// brakeFor returns the cut a quota report asks for: none while at least
// lowRemainingShare of the limit remains (one unit for small limits), then
// deeper the less remains, maxSoftCut at none. Proportional, because the
// fleet reads what remains many times a window: a small shortfall, often
// mere jitter of the window's count, costs a small cut, and only a real
// overshoot a large one. A report of nothing left may be cut again after
// slowCooldown, as a 429 may: the next request would be one.
func brakeFor(q Quota) cut {
	if !q.HasLimit || q.Limit <= 0 {
		return cut{}
	}
	low := max(1, lowRemainingShare*float64(q.Limit))
	if float64(q.Remaining) >= low {
		return cut{}
	}
	factor := 1 - maxSoftCut*(low-float64(q.Remaining))/low
	if q.Remaining == 0 {
		return cut{factor: factor, cooldown: 2 * slowCooldown, backdate: slowCooldown}
	}
	window := q.Window
	if window <= 0 {
		window = defaultQuotaWindow
	}
	return cut{factor: factor, cooldown: window + slowCooldown, backdate: slowCooldown}
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
	if f.slow.factor > 0 && (!has || float64(now-a.t0) >= f.slow.cooldown.Seconds()*unitsPerSecond) {
		curIv := iv
		if has {
			curIv = a.intervalAt(iv, now, unitsPerSecond)
		}
		cur := unitsPerSecond / float64(curIv)
		r0 := max(cur*f.slow.factor, ruleRate*minRateFraction)
		slope := ruleRate * recoverPerSecond
		// The rate is r0 at anchor and climbs from there.
		anchor := now
		if f.slow.fromFree {
			// A hard cut's climb starts at the bucket's next free slot:
			// not during a pause (listen pauses before it adapts), whose
			// end would otherwise see the rate the cut took away, nor
			// while slots booked before the cut still go, whose answers
			// repeat what the cut already heard: its cooldown counts
			// from there. Within a bound that keeps the rate before
			// anchor above half of r0.
			free := tat - (burst-1)*curIv
			anchor += max(0, min(free-now, int64(r0/(2*slope)*unitsPerSecond)))
		}
		back := int64(f.slow.backdate.Seconds() * unitsPerSecond)
		a = adaptation{rate0: r0 - slope*float64(back)/unitsPerSecond, t0: anchor - back, slope: slope,
			until: anchor + int64((ruleRate-r0)/slope*unitsPerSecond)}
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
