package throttle

import (
	"context"
	"math"
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
//     When the rejection reports its quota's limit and what remains, the
//     server will say how far below its quota the cut left the fleet, and
//     the lift wins the difference back within a few windows; the cut
//     then depends on what the fleet knew before. From the rule's rate
//     (the first rejection: the margin is unknown) it is deeper
//     (slowOnLimitedReported), since a cut that leaves the fleet just
//     under the quota is rejected again at the first jitter after the
//     pause, and every rejection costs a pause. From a rate the server's
//     feedback already holds well below the rule (at most heldBelow of
//     it) it is shallower (slowOnLimitedHeld): such a rejection is the
//     jitter of a fleet running close to the quota, not a large overshoot.
//   - recover: after any cut the rate climbs back by recoverPerSecond of
//     the rule's rate each second, never below minRateFraction of it.
//   - lift: a success reporting more than liftFromShare of every quota's
//     limit unused, while the bucket is held below its rule, raises the
//     rate by liftGain times that excess share of the rule's rate (at most
//     maxLift), at most once per quota window. Half the excess, because
//     the reading lags the rate by more than a window when the fleet's
//     waiters hold slots booked ahead at the old rate, so that two lifts
//     may read the same shortfall; one cut of half a shortfall twice
//     never overshoots it. The slow recovery is for servers that
//     say nothing but 429; a server that reports what remains tells the
//     fleet how far below the quota a cut left it, and a second cut or a
//     deep brake is won back in a few windows instead of tens of seconds.
//     The lift stops short of the brake's threshold, so the two never
//     answer the same reading; the slow recovery covers the gap between.
//     A lift's t0 is backdated as a brake's is: a hard cut may follow it
//     at once, a brake or another lift a window later.
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
	slowOnLimited         = 0.7
	slowOnLimitedReported = 0.6
	slowOnLimitedHeld     = 0.8
	heldBelow             = 0.8
	slowCooldown          = 250 * time.Millisecond
	lowRemainingShare     = 0.05
	maxSoftCut            = 0.10
	defaultQuotaWindow    = time.Second
	recoverPerSecond      = 0.02
	minRateFraction       = 0.01
	minSpreadReset        = time.Second
	liftFromShare         = 0.08
	maxLift               = 0.15
	liftGain              = 0.5
)

// cut asks the store to multiply a bucket's rate by factor (0 < factor < 1;
// 0 means no cut), unless the bucket's last cut (its adaptation's t0) lies
// less than cooldown in the past. The cut's own t0 is placed backdate
// before now: see the constants above.
//
// With fromFree set, the cut's rate holds from the bucket's next free slot
// on, and its t0 lies there: see adaptLocal.
//
// A bucket the feedback already holds well below its rule (at no more than
// heldBelow of its rate: a brake or two before the first rejection do not
// count) is multiplied by heldFactor instead, when it is set.
type cut struct {
	factor     float64
	heldFactor float64
	cooldown   time.Duration
	backdate   time.Duration
	fromFree   bool
}

// stronger reports whether c cuts deeper than d, or as deep sooner.
func (c cut) stronger(d cut) bool {
	if d.factor == 0 {
		return c.factor > 0
	}
	return c.factor > 0 && (c.factor < d.factor || (c.factor == d.factor && c.cooldown < d.cooldown))
}

// lift asks the store to raise a bucket's rate by share of its rule's rate
// (0 means no lift), up to the rule, when the bucket is held below it by a
// cut (not a spread) whose t0 lies at least cooldown in the past. The
// lift's own t0 is placed backdate before now.
type lift struct {
	share    float64
	cooldown time.Duration
	backdate time.Duration
}

// feedback is what a response asks of a request's buckets.
type feedback struct {
	// slow cuts the bucket's rate; the zero cut changes nothing.
	slow cut
	// lift raises a bucket held below its rule; never set with slow or
	// spread.
	lift lift
	// spread, with spreadIn > 0, holds the bucket to spread units of cost
	// within spreadIn.
	spread   int64
	spreadIn time.Duration
}

func (f feedback) empty() bool { return f.slow.factor == 0 && f.spreadIn <= 0 && f.lift.share == 0 }

// feedbackFor works out what sig asks of buckets bs. It returns an empty
// feedback when nothing needs the store, which is the common case: most
// responses are neither rejected nor close to a limit.
func feedbackFor(sig Signal, bs []bucket) feedback {
	var f feedback
	if sig.Limited {
		f.slow = cut{factor: slowOnLimited, cooldown: slowCooldown, fromFree: true}
		if reportsQuota(sig.Quotas) {
			f.slow.factor, f.slow.heldFactor = slowOnLimitedReported, slowOnLimitedHeld
		}
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
	if f.slow.factor == 0 && f.spreadIn <= 0 && !sig.HasRetryAfter {
		f.lift = liftFor(sig.Quotas)
	}
	return f
}

// reportsQuota reports whether any of qs gives its limit and what remains:
// what the lift reads.
func reportsQuota(qs []Quota) bool {
	for _, q := range qs {
		if q.HasLimit && q.HasRemaining && q.Limit > 0 {
			return true
		}
	}
	return false
}

// liftFor returns the lift a success's quota reports ask for: none unless
// every quota reporting what remains also reports its limit and has more
// than liftFromShare of it left; then liftGain times the smallest excess
// over that share, at most maxLift, once per the longest of their windows. A quota with
// nothing to say about what remains has no vote; a response with no quota
// reports asks for nothing.
func liftFor(qs []Quota) lift {
	share, window := math.Inf(1), time.Duration(0)
	for _, q := range qs {
		if !q.HasRemaining {
			continue
		}
		if !q.HasLimit || q.Limit <= 0 {
			return lift{}
		}
		share = min(share, float64(q.Remaining)/float64(q.Limit)-liftFromShare)
		w := q.Window
		if w <= 0 {
			w = defaultQuotaWindow
		}
		window = max(window, w)
	}
	if math.IsInf(share, 1) || share <= 0 {
		return lift{}
	}
	return lift{share: min(liftGain*share, maxLift), cooldown: window + slowCooldown, backdate: slowCooldown}
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
		factor := f.slow.factor
		if has && f.slow.heldFactor > 0 && cur <= ruleRate*heldBelow {
			factor = f.slow.heldFactor
		}
		r0 := max(cur*factor, ruleRate*minRateFraction)
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
		a = climb(r0, anchor, back, slope, ruleRate, unitsPerSecond)
		has = true
	}
	if f.lift.share > 0 && has && a.slope > 0 && float64(now-a.t0) >= f.lift.cooldown.Seconds()*unitsPerSecond {
		// Only a cut climbs (a spread's slope is 0: it holds until the
		// server's reset, which the lift's reading knows nothing of).
		r := unitsPerSecond/float64(a.intervalAt(iv, now, unitsPerSecond)) + f.lift.share*ruleRate
		if r >= ruleRate {
			has = false
		} else {
			back := int64(f.lift.backdate.Seconds() * unitsPerSecond)
			a = climb(r, now, back, a.slope, ruleRate, unitsPerSecond)
		}
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

// climb returns the adaptation whose rate is r at time at and climbs by
// slope per second until it reaches ruleRate, with its t0 placed back
// before at (the line is the same from whichever point it is referenced).
// It is climb in adapt.lua.
func climb(r float64, at, back int64, slope, ruleRate, unitsPerSecond float64) adaptation {
	return adaptation{rate0: r - slope*float64(back)/unitsPerSecond, t0: at - back, slope: slope,
		until: at + int64((ruleRate-r)/slope*unitsPerSecond)}
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
