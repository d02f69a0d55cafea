package feedback

import (
	"math"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/store"
)

// This file holds the model of the server's limiter that the fleet reads
// the server's answers into (docs/FEEDBACK.md tells it in full, with the
// measurements behind each constant).
//
// The server counts in its window W what the whole fleet, and anyone else
// on the same quota, sent, and admits L. A response reports what remains,
// R, at about the moment the request reached it. The fleet knows what it
// sent itself: while the server reports a quota, every replica reports the
// units it sent in the bucket with its next reservation, the store adds
// them to the bucket's count, every reservation returns the count, and
// each replica keeps a ledger of (time, count) samples from its own
// reservations. Only what left counts: a slot booked and given back, or
// held by a pause and booked again, was never seen by the server. One reading then tells how much the fleet may send per
// window: what it sent in the window before the request's departure d,
// plus what remains, less a reserve for jitter (the rule's headroom of L):
//
//	room = own(d-W, d] + R - (headroom·L + 1),   rate = room / W.
//
// (In the first window, where the count covers only part of W, what others
// spent in it beyond the reserve, L - R - own - reserve, is taken at a whole
// window's worth.)
//
// Whatever else spends the quota (another consumer, a quota smaller than
// the rule) shows as a smaller R beside the same own; nothing else needs
// estimating, and a reading needs no memory of the ones before: each
// replaces the last. The reserve's extra unit is the resolution of a
// reading (whole requests) for a window shared with another stream, each
// landing up to a request off its pace; a room within one unit of the
// rule's is the rule's, so that a fleet alone on its quota pays nothing
// for it. A rate below the rule's caps the bucket for capWindows
// windows, renewed by the next readings; a rate at or above it leaves the
// bucket to its rule. With the rule equal to the quota and nobody else on
// it, own ≈ (1-headroom)·L and R ≈ headroom·L, so the cap is the rule
// itself: reading the server costs nothing where it has nothing to add.
//
// A fixed window says more: R is all there is until the reset T, when the
// quota refills. A quota whose reset stays put for longer than whole-second
// rounding can explain (fixedAfter, within resetSlack) is read as fixed:
// the bucket then spends R, less what the fleet booked since the reading,
// evenly until T, and a success reporting nothing left pauses the fleet
// until T. Anything else (a reset that moves with every answer, windows too
// short to tell) is read as sliding, which never holds the fleet back for a
// reset.
//
// The first window need not wait for a ledger a window long: the store
// counts from the first answer that reports a quota, which comes as the
// fleet starts, so a ledger that reaches back to where the count began
// (within countStart units) counts everything the fleet sent.
//
// A rejection reports R = 0 by itself. With no quota report at all (a bare
// 429 with or without Retry-After) the server's L and W are unknown: the
// rule's period stands for W, the room is what the fleet sent in it less
// the rule's headroom, and since such a server says nothing more until it
// rejects again, the cap climbs back to the rule by headroom·rule per
// climbWindows windows. A rejection met while the fleet sent less than
// half its rule in the window is a refusal, not a full window (the server
// paused, or the fleet had just been paused): it pauses the fleet and caps
// nothing.
//
// A wait that ends within sameWaitSlack after a pause this process knows of
// is that pause told again (whole seconds round up): it does not extend it.
//
// A rejection that names no wait pauses the fleet for noWaitPause, doubling
// with every such rejection in a row up to noWaitMaxPause, and back to the
// start after a success; for recheckAfterPause after a pause, every waiter
// that slept asks the store whether another replica was told of a new one
// before it departs (Views.Recheck; the root's Transport.checkHeld asks),
// so that a fleet probing a refusal sends about one request into each
// pause, not one per replica.
const (
	capWindows         = 2
	countWindows       = 10
	climbWindows       = 10
	minUnitsPerWindow  = 8
	resetSlack         = 1250 * time.Millisecond
	fixedAfter         = 2 * time.Second
	noWaitPause        = 50 * time.Millisecond
	noWaitMaxPause     = 250 * time.Millisecond
	recheckAfterPause  = time.Second
	sameWaitSlack      = time.Second
	resetRounding      = time.Second
	ledgerSize         = 64
	countStart         = 1 + minUnitsPerWindow
	ledgerSamplesPerW  = ledgerSize / 2
	quotaViewIdleAfter = time.Minute
)

// Read works out what sig, the answer to a request booked as bk in bs,
// asks of the store at now.
func (v *Views) Read(bs []store.Bucket, bk Booking, sig header.Signal, now int64) Actions {
	var act Actions
	quotas := requestQuotas(sig.Quotas)
	if !sig.Limited && !sig.HasRetryAfter && quotas == 0 {
		if v.struck.Load() > 0 {
			v.mu.Lock()
			for i := range bs {
				if vw := v.views[bs[i].Key]; vw != nil && vw.strikes > 0 {
					vw.strikes = 0
					v.struck.Add(-1)
				}
			}
			v.mu.Unlock()
		}
		return act
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	vws := make([]*quotaView, len(bs))
	peers := v.peers()
	for i := range bs {
		vws[i] = v.viewLocked(bs[i].Key, now)
		vws[i].sliding = slidingWindow(&bs[i])
		vws[i].peers = peers
		vws[i].began = v.began.Load()
		if !sig.Limited {
			// Only successes tell a window's kind: through a pause
			// every rejection names the pause's end, which stays put
			// as a fixed window's reset does, and a sliding window
			// read as fixed after a 3 s pause was spread over its
			// reset, down to 86/s of 196 (the matrix's 4x8 pause cell).
			vws[i].detect(sig.Quotas, now)
		}
	}
	// Whether a rejection is a full window's (fullWindow) decides how
	// long a whole-second wait pauses.
	full := sig.Limited
	for i := range bs {
		spec, force, ok := vws[i].decide(&bs[i], bk.Depart, bk.count(i) > 0, sig, now)
		full = full && vws[i].fullWindow(&bs[i], bk, requestQuotas(sig.Quotas) > 0)
		if ok && vws[i].shouldSend(spec, force, &bs[i], now) {
			vws[i].sent, vws[i].sentAt = spec, now
			act.Caps = append(act.Caps, BucketCap{Bucket: i, Cap: spec})
		}
	}
	if full {
		at := bk.Depart
		if at <= 0 {
			at = now
		}
		for _, vw := range vws {
			vw.fullAt = max(vw.fullAt, at)
		}
	}
	act.Pause = v.pauseLocked(bs, vws, sig, full)
	if act.Pause > 0 && act.Pause < time.Duration(math.MaxInt64-now) {
		// The same pause told again: a wait in whole seconds rounds up,
		// so the requests already in flight into a pause come back naming
		// ends up to a second later than the first did. Extending by them
		// would hold the fleet up to a second past a pause that ended.
		end := now + int64(act.Pause)
		told := true
		for _, vw := range vws {
			until := vw.pausedUntil.Load()
			told = told && until > now && end <= until+int64(sameWaitSlack)
		}
		if told {
			act.Pause = 0
		}
	}
	return act
}

// pauseLocked returns the pause sig asks of the fleet (0 for none) and
// keeps the views' count of rejections in a row; full reports that sig
// is a rejection of a full window (quotaView.fullWindow) of bs, whose
// views are vws. v.mu must be held.
func (v *Views) pauseLocked(bs []store.Bucket, vws []*quotaView, sig header.Signal, full bool) time.Duration {
	if !sig.Limited {
		for _, vw := range vws {
			if vw.strikes > 0 {
				vw.strikes = 0
				v.struck.Add(-1)
			}
		}
	}
	wait, named := sig.Wait()
	switch {
	case sig.HasRetryAfter && full && roundedWithin(bs, vws, wait):
		// A full sliding window frees room as its oldest requests
		// leave, and the whole seconds of the wait round that up: the
		// cap just read paces the fleet into the room, after the least
		// the wait can mean, and after a rejection's probe backoff.
		return max(wait-resetRounding, v.strikeLocked(vws))
	case sig.HasRetryAfter:
		return wait
	case named && sig.Limited:
		return wait
	case named:
		// A success reporting nothing left: a fixed window stays empty
		// until its reset, a sliding one frees slots before it.
		for _, vw := range vws {
			if vw.fixed && !vw.sliding {
				return wait
			}
		}
		return 0
	case sig.Limited:
		return v.strikeLocked(vws)
	}
	return 0
}

// strikeLocked counts a rejection in a row in every view of vws and
// returns the pause it earns (noWaitFor). v.mu must be held.
func (v *Views) strikeLocked(vws []*quotaView) time.Duration {
	strikes := 0
	for _, vw := range vws {
		if vw.strikes == 0 {
			v.struck.Add(1)
		}
		vw.strikes++
		strikes = max(strikes, vw.strikes)
	}
	return noWaitFor(strikes)
}

// roundedWithin reports whether a rejection's wait is in whole seconds
// (Retry-After's own resolution, seconds or an HTTP date) and no longer
// than the window of any bucket of bs (vws, their views), none of which
// is known to be fixed: the wait then says when the window's oldest
// requests leave, to the second, rounded up. A wait longer than the
// window is no window's: a pause of the server's, to be honoured whole;
// and a fixed window stays full until its reset.
func roundedWithin(bs []store.Bucket, vws []*quotaView, wait time.Duration) bool {
	if wait < resetRounding || wait%resetRounding != 0 {
		return false
	}
	for i, vw := range vws {
		if vw.fixed || wait > vw.windowOr(&bs[i]) {
			return false
		}
	}
	return true
}

// slidingWindow reports whether b is a sliding log's or a sliding
// counter's bucket, which the model reads only in the server's rejections.
//
// Such a bucket already keeps the server's window itself, so a success
// reporting room tells it nothing it needs, and reading one harms: the
// sliding algorithms send in bursts (a log lets its whole quota go the
// moment its oldest entry leaves), which the ledger's samples, a 32nd of a
// window apart, miscount by a few units. The reading's room then falls
// past the dead band, the bucket is capped at a rate, and the rate spreads
// the requests the window would let go together while the window, full of
// the bursts before, leaves gaps; a log's bursts a window apart also look
// like a fixed window's resets, so a success naming no room left paused
// the fleet until the reset. Measured, a 100/s fleet of 4 × 8 through
// Redis against a server of its own algorithm that reports X-RateLimit-*
// or the IETF fields: 0.57-0.65 of the quota (sliding log) and 0.94
// (sliding counter) reading successes, beside 1.000 and 0.97 without
// headers (internal/algorithmtest, TestFleetPerAlgorithmReadingHeaders).
// A rejection still caps (someone else spends the quota) and pauses as
// for every bucket.
func slidingWindow(b *store.Bucket) bool {
	return b.Algorithm == store.SlidingLog || b.Algorithm == store.SlidingCounter
}

// fullWindow reports whether a rejection of a request of b booked as bk
// is a full window's. The ledger tells it where it covers an eighth of the
// window (minCoveredShare) up to the departure: the fleet sent at least
// half its rule in the window (not a refusal, see refusal). Where it
// cannot (empty, begun a moment ago, stale in a replica whose waiters
// all sleep, or lowered by a pause the request left after, see
// heldWithin), what else shows the fleet sending at its pace over half the
// window tells it (fullQueue): the request's own queue (Booking.QueueFrom),
// or a full window read within half a window of its departure (the short
// pause that rejection earned cannot have emptied it); and so
// does a rejection that reports the quota (its window is spent). A bare
// rejection the model cannot place is no window's for sure.
func (vw *quotaView) fullWindow(b *store.Bucket, bk Booking, quota bool) bool {
	w := vw.windowOr(b)
	own, covered, ok := vw.ledger.window(int64(w), bk.Depart)
	if ok && covered >= int64(w)/minCoveredShare && !vw.heldWithin(int64(w), bk.Depart) {
		return !refusal(own, time.Duration(covered), 1e9/float64(b.Interval))
	}
	half := int64(w) / fullQueue
	since := bk.Depart - vw.fullAt
	recent := vw.fullAt > 0 && bk.Depart > 0 && since >= -half && since <= half
	return quota || bk.queueLen() >= half || recent
}

// fullQueue: what shows the fleet sending at its pace over 1/fullQueue of
// the window shows a full window (fullWindow), as much as a ledger
// showing half the rule sent there does (refusal). The ledger of a
// replica whose waiters all sleep on a deep queue cannot tell: an 8 × 16
// fleet books in turns 560 ms apart, so that most of its rejections met
// a stale ledger, and a whole-second Retry-After from a sliding window of
// 1 s shared with an outside consumer paused the fleet for a second at
// each (8x16_sliding-1s_retry-after_outside_b1: seconds of 153, 42, 99,
// 98, 44 sent, 0.50 of what remains, 2026-12-04).
const fullQueue = 2

// windowOr returns the shortest window a reading has needed (quotaWindow),
// or b's rule window before any.
func (vw *quotaView) windowOr(b *store.Bucket) time.Duration {
	if vw.window > 0 {
		return vw.window
	}
	return ruleWindow(b)
}

// refusal reports whether a rejection met when the fleet had sent own in
// the window w, under half what its rule allows there, is a refusal (a
// pause, an outage of the server) rather than the sign of a full window:
// it then says nothing of the room the window leaves.
func refusal(own float64, w time.Duration, ruleRate float64) bool {
	return own < ruleRate*w.Seconds()/2
}

// noWaitFor returns the pause after the strikes-th rejection in a row that
// named no wait: noWaitPause, doubling, at most noWaitMaxPause.
func noWaitFor(strikes int) time.Duration {
	d := noWaitPause
	for i := 1; i < strikes && d < noWaitMaxPause; i++ {
		d *= 2
	}
	return min(d, noWaitMaxPause)
}

// requestQuotas returns how many of qs report a limit and what remains of
// it in requests: what the model reads (a token quota counts something
// the fleet's buckets do not).
func requestQuotas(qs []header.Quota) int {
	n := 0
	for i := range qs {
		if readable(&qs[i]) {
			n++
		}
	}
	return n
}

func readable(q *header.Quota) bool {
	return q.HasLimit && q.HasRemaining && q.Limit > 0 && (q.Unit == "" || q.Unit == "requests")
}

// detect updates the fixed-window reading from the first readable quota
// with a reset: see the file's comment.
func (vw *quotaView) detect(qs []header.Quota, now int64) {
	for i := range qs {
		q := &qs[i]
		if !readable(q) || !q.HasReset || q.Reset <= 0 {
			continue
		}
		at := store.SatAdd(now, int64(q.Reset))
		switch d := at - vw.resetAt; {
		case vw.resetAt == 0:
			vw.resetAt, vw.resetSince = at, now
		case now >= vw.resetAt:
			// The reset came: a new window, as a fixed one does.
			vw.resetAt, vw.resetSince = at, now
		case d >= -int64(resetSlack) && d <= int64(resetSlack):
			if now-vw.resetSince >= int64(fixedAfter) {
				vw.fixed = true
			}
		default:
			// The reset moved before it came: the window slides.
			vw.fixed = false
			vw.resetAt, vw.resetSince = at, now
		}
		return
	}
}

// decide returns the cap bucket b should have after sig, the answer to a
// request departing at depart whose bucket the store counts (counted);
// force when it must reach the store whatever was sent before (a
// rejection's); ok false when sig says nothing the model can use.
func (vw *quotaView) decide(b *store.Bucket, depart int64, counted bool, sig header.Signal, now int64) (spec store.Cap, force, ok bool) {
	if !counted && (!sig.Limited || requestQuotas(sig.Quotas) == 0 || vw.ledger.len == 0) {
		// Count first, to read the next answers.
		return vw.countFirst(b, sig)
	}
	spec, force, ok = vw.read(b, depart, sig, now)
	if !ok && !counted {
		return vw.countFirst(b, sig)
	}
	// A rejection of a request booked before the store counted (a cut
	// may have stretched its slot since) that reports the quota is read
	// against the ledger like any other when the ledger reaches its
	// departure: the window is full whoever booked the request. A bare
	// one is not: its room is the fleet's own sending, which a count
	// begun a few milliseconds before puts at a few units (an 8x16 fleet
	// beside Stripe's no-timing 429s was capped at 8/s). A success of
	// such a request is not either: in the first window, readings of the
	// requests booked before the first answer are many, and each early
	// one scales the noise of a few units to a window (measured, 8x16
	// outside: 0.57 of what remains reading them, 0.67-0.70 not).
	return spec, force, ok
}

// countFirst returns the cap that has the store count bucket b, when sig
// reports a quota or is a rejection: the model reads the answers after.
func (vw *quotaView) countFirst(b *store.Bucket, sig header.Signal) (store.Cap, bool, bool) {
	if sig.Limited || requestQuotas(sig.Quotas) > 0 {
		return store.Cap{Span: countWindows * ruleWindow(b)}, false, true
	}
	return store.Cap{}, false, false
}

// read is decide for a reading against the ledger.
func (vw *quotaView) read(b *store.Bucket, depart int64, sig header.Signal, now int64) (spec store.Cap, force, ok bool) {
	ruleRate := 1e9 / float64(b.Interval)
	countOnly := store.Cap{Span: countWindows * ruleWindow(b)}
	if vw.sliding && !sig.Limited {
		// See slidingWindow: a success leaves the window to the bucket.
		return store.Cap{}, false, false
	}
	best, bestOK := store.Cap{}, false
	for i := range sig.Quotas {
		// own and covered of a first window's reading (covered 0 for any
		// other): what the fleet sent there beyond the cap is a debt.
		var firstOwn float64
		var firstCovered int64
		q := &sig.Quotas[i]
		if !readable(q) {
			continue
		}
		w := quotaWindow(q, b)
		if vw.window == 0 || w < vw.window {
			vw.window = w
		}
		reserve := b.Headroom*float64(q.Limit) + 1
		var c store.Cap
		slack := 0.0
		if vw.fixed && q.HasReset && q.Reset > 0 {
			// What remains until the reset, less what the fleet has
			// sent since this request (as far as this process knows).
			since, ok := vw.ledger.since(depart)
			if !ok {
				continue
			}
			// Spread over the reset less its rounding: a reset in whole
			// seconds may come up to a second early, and erring that way
			// costs nothing (an empty fixed window pauses the fleet until
			// it refills), while the other way holds the fleet below the
			// quota for the whole window.
			room := float64(q.Remaining) - reserve - since
			in := max(q.Reset-resetRounding, q.Reset/2)
			c = store.Cap{Rate: max(room, 0) / in.Seconds(), Span: in}
		} else {
			own, covered, ok := vw.ledger.window(int64(w), depart)
			if !ok || covered < int64(w)/minCoveredShare || (sig.Limited && refusal(own, time.Duration(covered), ruleRate)) {
				continue
			}
			// What the reading cannot tell: the ledger's (see slack), and
			// what the fleet sent while this request was on its way, which
			// the server may have counted before it.
			slack = vw.ledger.slack(int64(w), depart, own, covered, ruleRate) + own*float64(max(now-depart, 0))/float64(covered)
			if vw.ledger.restarted && covered < int64(w) && !sig.Limited {
				// A count begun afresh after one lapsed misses what the
				// fleet sent between the two, which the server's window
				// still holds: read as others' and scaled to a window,
				// it capped a fleet alone on its quota at 21/s after a
				// pause (the matrix's 1x32-local pause cell). Successes
				// wait for a full window of count; a rejection still
				// caps, unscaled (below).
				continue
			}
			// What others spent in the span the count covers; in the first
			// window their spending so far is only part of what they will
			// spend in it, and what exceeds the reserve (the noise of one
			// reading against the ledger: whole requests, some in flight)
			// counts at a whole window's worth.
			others := max(float64(q.Limit-q.Remaining)-own, 0)
			if covered < int64(w) && !vw.ledger.restarted {
				// A replica reports a request's units with its next
				// booking: one that books rarely holds its last
				// request's unreported until then, which the server
				// counts and the ledger does not. Read as others' and
				// scaled to a window, the single requests of seven
				// nearly idle replicas (one a second each) capped the
				// busy one beside them at 166-185/s through its first
				// second (182 sent where the rules alone sent 195).
				// One request a peer is the least such a peer holds;
				// later windows' reserve absorbs it unscaled.
				others = max(others-float64(vw.peers*max(b.Cost, 1)), 0)
			}
			if covered < int64(w) && others > reserve && !vw.ledger.restarted {
				// What the reading cannot tell of own is as much
				// unknown of others', scaled alike: a few units of noise
				// over the first 150 ms, scaled to a window unslacked,
				// capped a fleet alone on its quota at 103/s for its
				// first second once the cap re-timed its waiters.
				scale := float64(w) / float64(covered)
				others = reserve + (others-reserve)*scale
				slack *= scale
			}
			room := float64(q.Limit) - others - reserve
			c = store.Cap{Rate: room / w.Seconds(), Span: capWindows * w}
			if covered < int64(w) && !vw.ledger.restarted {
				firstOwn, firstCovered = own, covered
			}
		}
		c.Rate = max(c.Rate, minUnitsPerWindow/w.Seconds())
		switch room := c.Rate * w.Seconds(); {
		case room+deadBand >= ruleRate*w.Seconds()-1e-3:
			// Within the dead band of the rule: the reserve's extra unit
			// is for a quota shared with others; alone, the rule is it.
			c.Rate = ruleRate
		case !sig.Limited && room+slack+deadBand >= ruleRate*w.Seconds()-1e-3:
			// Within what the reading cannot tell of the rule: it proves
			// neither a cut nor the rule, and says nothing (a cap in
			// force stays, and lapses unless a reading renews it). A
			// rejection is no such reading: the window is full.
			continue
		case firstCovered > 0:
			c.Debt = firstWindowDebt(firstOwn, firstCovered, w, c.Rate)
			// Due by the first window's end (store.Cap.PayBy): the count
			// began covered before the departure.
			if c.PayBy = time.Duration(depart - firstCovered + int64(w) - now); c.PayBy <= 0 {
				c.Debt, c.PayBy = 0, 0
			}
		}
		if !bestOK || c.Rate < best.Rate {
			best, bestOK = c, true
		}
	}
	switch {
	case bestOK:
		if best.Rate >= ruleRate {
			return countOnly, false, true
		}
		// A rejection's cap goes at once: the waiters a pause sends back
		// book again at the rate in force when it ends. It re-times the
		// queue too (store.Cap.Retime): the window is full for sure.
		best.Retime = sig.Limited
		return best, sig.Limited, true
	case requestQuotas(sig.Quotas) > 0 || !sig.Limited:
		return store.Cap{}, false, false
	}
	// A rejection with no quota report: see the file's comment.
	w := ruleWindow(b)
	if vw.probe(int64(w), depart, sig) {
		return store.Cap{}, false, false
	}
	own, covered, ok := vw.ledger.window(int64(w), depart)
	if !ok {
		return store.Cap{}, false, false
	}
	// The window's part before the count: see uncounted.
	if u := vw.uncounted(int64(w), covered, depart); u > 0 {
		own += ruleRate * float64(u) / 1e9
		covered += u
	}
	if refusal(own, time.Duration(covered), ruleRate) {
		return store.Cap{}, false, false
	}
	rate := max((own-b.Headroom*float64(b.Rate))/w.Seconds(), minUnitsPerWindow/w.Seconds())
	if rate >= ruleRate {
		return countOnly, false, true
	}
	slope := b.Headroom * ruleRate / (climbWindows * w.Seconds())
	if slope <= 0 {
		slope = ruleRate / (climbWindows * w.Seconds())
	}
	span := time.Duration((ruleRate - rate) / slope * 1e9)
	return store.Cap{Rate: rate, Slope: slope, Span: max(span, countOnly.Span), Retime: true}, true, true
}

// probe reports whether a bare rejection that names no wait, of a request
// that departed at t, is a probe of the no-wait backoff's: the request
// left after a pause began (as far as this process knows, see
// quotaView.pausedFrom) less than a window w before. Such a rejection says
// nothing of the room: the fleet's count in its window fell because the
// fleet was held, not because others took the room, and read as a full
// window each probe cut the fleet deeper. Measured, the matrix's 8x16
// Stripe pause cell (a provider refusing everything for 3 s, 429s naming
// no wait): the rejections of the 0.3 s after the refusal began capped
// the fleet at 190, 175, 167, 146 and 135/s as its count emptied, and it
// ran at 104-136/s for the three seconds after the refusal ended (0.50-
// 0.77 of the quota, against 0.97 with reading off, in 3 of 5 runs of
// 2026-12-05). The first rejection of a row, of a request that left before
// the pause, is read; the backoff (noWaitFor) goes on either way.
func (vw *quotaView) probe(w, t int64, sig header.Signal) bool {
	return !sig.HasRetryAfter && vw.heldWithin(w, t)
}

// heldWithin reports whether a request that departed at t left after a
// pause began (as far as this process knows, see quotaView.pausedFrom)
// less than a window w before: the fleet's count in its window is then
// lower by what the pause held, and says nothing of the room.
func (vw *quotaView) heldWithin(w, t int64) bool {
	return vw.pausedFrom > 0 && t >= vw.pausedFrom && t-vw.pausedFrom < w
}

// uncounted returns how much of the window w before t lies before the
// count (which covers the last covered of it, see ledger.window) and yet
// after this process's first request and after the latest pause it knows
// of: a span in which the fleet may have sent, at up to its rule's pace,
// what no count holds. A bare rejection read over the count alone takes
// the fleet's sending there for others' and cuts it to what it counted:
// the store counts a bucket from its first reading only, and after a Redis
// restart from the first rejection, so 32 units counted over the 240 ms
// before a rejection capped an 8 × 16 fleet of 196/s at 28/s, which it
// climbed back from at 0.2 % a second (internal/faulttest's use-after
// gate: 0.53-0.62 of the quota over the 5 s after the return; the
// feedback matrix's Stripe pause cell ran at 81-96/s after the pause the
// same way). The span is taken at the rule's pace, the most the fleet
// could have sent there uncapped (it was: a cap makes the store count):
// an idle fleet is read too generously, which the next rejection, over a
// longer count, corrects, and errs towards what the quota allows. Before
// the process's first request the fleet started within the window (its
// other replicas as this one, as far as this one can tell), and a pause
// sent nothing: both are left out.
func (vw *quotaView) uncounted(w, covered, t int64) int64 {
	if covered >= w || vw.began == 0 {
		return 0
	}
	from := max(t-w, vw.began, vw.pausedUntil.Load())
	return max(t-covered-from, 0)
}

// firstWindowDebt returns what a fleet that sent own over the first covered
// of a window w sent beyond rate, a cap's pace, as units to pay once
// (store.Cap.Debt). Nothing the fleet sent in its first window has left
// the server's window yet, so a cap that only slows what comes next lets
// the window end with own + rate·(w − covered), over the room of rate·w by
// the debt (measured: a 4 × 8 fleet at 196/s beside an outside consumer
// of 60/s read a cap of 135/s after 125 ms, its first second held 142
// beside the consumer's 58 and met a 429 whose whole-second Retry-After
// cost most of the next second; 0.69 of what remained). Paying the debt
// delays the bucket's next slot by debt/rate, never past the window's end,
// when what the fleet sent early begins to leave it.
func firstWindowDebt(own float64, covered int64, w time.Duration, rate float64) float64 {
	left := max(int64(w)-covered, 0)
	return min(max(own-rate*float64(covered)/1e9, 0), rate*float64(left)/1e9)
}

// shouldSend reports whether spec must go to the store: a rejection's cap
// always; otherwise a cap below the one this process sent last (any
// tightening: the reserve is a few units a window, and a cap left a drift
// above the reading spends them), a cap above it by more than maxCapDrift
// of the rule (a cap where there was none, only when this far below the
// rule; none where there was a cap, always), or when the last one is half
// through its span; and never more often than ledgerSamplesPerW times a
// window, so a busy bucket costs the store a few calls a window.
func (vw *quotaView) shouldSend(spec store.Cap, force bool, b *store.Bucket, now int64) bool {
	if force || vw.sentAt == 0 {
		return true
	}
	since := now - vw.sentAt
	if since < int64(ruleWindow(b))/ledgerSamplesPerW {
		return false
	}
	ruleRate := 1e9 / float64(b.Interval)
	switch {
	case vw.sent.Rate == 0 && spec.Rate > 0:
		// From the rule to a cap: only for more than the drift, so that
		// a reading a unit or two low, jitter at a quota the fleet has
		// alone, costs nothing.
		return spec.Rate < ruleRate*(1-maxCapDrift)
	case spec.Rate == 0 && vw.sent.Rate > 0:
		return true
	case spec.Rate > 0 && spec.Rate < vw.sent.Rate:
		return true
	case spec.Rate-vw.sent.Rate > maxCapDrift*ruleRate:
		return true
	case spec.Debt >= vw.sent.Debt+1:
		// A debt grew by a unit or more: it is paid once, and a unit
		// is what the reserve's resolution allows.
		return true
	}
	return since >= int64(vw.sent.Span)/2
}

// deadBand is how close to the rule, in units a window, a room is the rule.
// A fleet alone at its rule reads own + R between L − 1 and L: the server
// counts whole requests, and a window of a rule that is not a whole number
// a window holds one more or one fewer, so a reading's room falls anywhere
// from one to two units below the rule (measured: R = 0, own = 19.6, room
// 18.2 at a quota of 20, rule 19.6). With a band of one unit, half the
// readings of a fleet alone capped it, and a quota of 20 a second, where a
// first cap need be only 0.4 below the rule, held at 18.2 (the matrix's
// 20/s steady cells: 0.96 of the quota beside 0.98 without reading).
const deadBand = 2

// maxCapDrift is how far, as a share of the rule, a new cap may rise above
// the last one sent before it is worth a store call.
const maxCapDrift = 0.02

// span returns the window the ledger's samples are spaced for: the
// shortest a reading has needed, the rule's period before any. A reading
// over a window much longer than that finds no ledger reaching back so far
// and caps nothing by the sliding reading (a day-long policy beside a
// burst one); a fixed window needs only the ledger's last samples.
func (vw *quotaView) span(b *store.Bucket) time.Duration {
	if vw.window > 0 {
		return vw.window
	}
	return ruleWindow(b)
}

// ruleWindow returns the rule's period: the window the model assumes when
// the server names none and reports no limit.
func ruleWindow(b *store.Bucket) time.Duration { return max(rulePeriod(b), time.Millisecond) }

// rulePeriod returns the Period of b's rule as written. A window bucket's
// Period is its window, which for a sliding log is longer than the rule's
// by the headroom (the root's slidingLogWindow); its Interval is, as every
// bucket's, the rule's Period over its Rate less the headroom, so the
// rule's Period is Interval·Rate·(1-Headroom). When the server names no
// window, the model takes the rule's for it, not the log's (measured: read
// over the log's 1.02 s, a 100/s log alone on a server reporting
// X-RateLimit-* read a room of 97 a window, 3 below its 100, was capped at
// it every window, and its log, still holding the bursts the cap spread,
// left gaps: 0.79-0.86 of the quota beside 1.000 without reading,
// internal/algorithmtest's TestFleetPerAlgorithmReadingHeaders).
func rulePeriod(b *store.Bucket) time.Duration {
	if b.Algorithm == store.SlidingLog && b.Rate > 0 && b.Interval > 0 {
		p := float64(b.Interval) * float64(b.Rate) * (1 - b.Headroom)
		if p < float64(b.Period) {
			return time.Duration(math.Round(p))
		}
	}
	return b.Period
}

// maxQuotaWindow bounds a quota's window as the fleet models it:
// header.Signal.Normalize bounds a window the server names at one year,
// and a window worked out from a rule is bounded alike.
const maxQuotaWindow = 366 * 24 * time.Hour

// quotaWindow returns q's window: the one the server names, else the time
// the rule takes to spend q's limit (the rule's period when the rule is the
// quota).
func quotaWindow(q *header.Quota, b *store.Bucket) time.Duration {
	if q.Window > 0 {
		return q.Window
	}
	w := float64(rulePeriod(b)) * float64(q.Limit) / float64(max(b.Rate, 1))
	return time.Duration(min(max(w, float64(time.Millisecond)), float64(maxQuotaWindow)))
}
