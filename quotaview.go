package throttle

import (
	"math"
	"sync"
	"sync/atomic"
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
// before it departs (see Transport.acquireOnce), so that a fleet probing a
// refusal sends about one request into each pause, not one per replica.
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

// quotaViews is this process's reading of the server's quotas: one view per
// bucket key that a response has said something about. Safe for
// concurrent use.
//
// Every request takes and reports its units (take, departed), whether or
// not a server ever reported a quota, so those two take no lock: they find
// the view in index, without mu, and count in its atomics (quotaView.unsent
// and the fields beside it). Everything else is under mu.
type quotaViews struct {
	mu      sync.Mutex
	views   map[string]*quotaView
	sweptAt int64
	// index holds views' entries (key → *quotaView) for the lookups
	// without mu; views is the one that says which views exist.
	index sync.Map
	// struck counts the views with rejections in a row (strikes > 0), read
	// without mu: a success that says nothing about limits, nearly every
	// response, has then nothing to reset and takes no lock.
	struck atomic.Int32
	// counted counts the views whose bucket the store counted
	// (quotaView.counted), and len the views, both read without mu for the
	// same reason.
	counted, len atomic.Int32
}

// quotaView is what this process knows of one bucket's quota at the server.
type quotaView struct {
	ledger ledger
	// resetAt is the quota's reset as first seen (Unix ns), since when,
	// and whether it stayed put long enough to call the window fixed.
	resetAt, resetSince int64
	fixed               bool
	// strikes counts rejections in a row that named no wait.
	strikes int
	// pausedUntil is the end of the latest pause this process knows of.
	pausedUntil int64
	// sent is the last cap this process sent, at sentAt.
	sent   store.Cap
	sentAt int64
	// unsent is the units this process sent in the bucket and has not yet
	// reported to the store (store.Bucket.Sent); it and unsentSince, delay,
	// counted and touched are atomics, read and written without mu by take
	// and departed (counted written under mu only).
	unsent atomic.Int64
	// window is the shortest window a reading has needed, to which the
	// ledger's samples are spaced (see span).
	window time.Duration
	// counted is whether the store counted the bucket at this process's
	// last reservation of it.
	counted atomic.Bool
	// unsentSince is when the oldest unreported unit left (Unix ns), and
	// delay the mean time a unit waits to be reported (ns, smoothed over
	// the reports, half of each report's oldest; a float64's bits): a
	// sample's count is of what was reported by then, which left about
	// delay earlier, so the ledger dates it there (see booked).
	unsentSince atomic.Int64
	delay       atomic.Uint64
	// touched is the last time the view was used, for sweeps; swept is
	// set once a sweep dropped the view, so that a departure that found it
	// in index just before reports into the view that replaces it.
	touched atomic.Int64
	swept   atomic.Bool
}

func newQuotaViews() *quotaViews { return &quotaViews{views: make(map[string]*quotaView)} }

// booking is what a request's reservation tells the model: when it departs
// (Unix ns of the Transport's clock) and each bucket's count (see
// store.Reservation.Counts; nil or 0 when not counted).
type booking struct {
	depart int64
	counts []int64
}

func (bk booking) count(i int) int64 {
	if i < len(bk.counts) {
		return bk.counts[i]
	}
	return 0
}

// feedbackActions is what a response asks of the store.
type feedbackActions struct {
	pause time.Duration // pause every bucket of the request for this long
	caps  []bucketCap
}

// bucketCap is a cap for the request's bucket i.
type bucketCap struct {
	i    int
	spec store.Cap
}

// viewLocked returns the view of key, made if needed. v.mu must be held.
func (v *quotaViews) viewLocked(key string, now int64) *quotaView {
	vw := v.views[key]
	if vw == nil {
		v.sweepLocked(now)
		vw = &quotaView{}
		v.views[key] = vw
		v.index.Store(key, vw)
		v.len.Add(1)
	}
	vw.touched.Store(now)
	return vw
}

// lookup returns the view of key, or nil, without mu.
func (v *quotaViews) lookup(key string) *quotaView {
	if vw, ok := v.index.Load(key); ok {
		return vw.(*quotaView)
	}
	return nil
}

// sweepLocked drops views unused for quotaViewIdleAfter, at most once per
// that time, so that partitioned buckets leave no trail. v.mu must be held.
func (v *quotaViews) sweepLocked(now int64) {
	if now-v.sweptAt < int64(quotaViewIdleAfter) {
		return
	}
	for k, vw := range v.views {
		if now-vw.touched.Load() < int64(quotaViewIdleAfter) {
			continue
		}
		// A departure may have found vw in index and touched it since the
		// first look; it looks at swept after touching, so one of the two
		// sees the other (see departed).
		vw.swept.Store(true)
		if now-vw.touched.Load() < int64(quotaViewIdleAfter) {
			vw.swept.Store(false)
			continue
		}
		if vw.strikes > 0 {
			v.struck.Add(-1)
		}
		if vw.counted.Load() {
			v.counted.Add(-1)
		}
		delete(v.views, k)
		v.index.Delete(k)
		v.len.Add(-1)
	}
	v.sweptAt = now
}

// take moves the units sent and not yet reported in bs's buckets into
// bs (store.Bucket.Sent), for the reservation about to be made at now.
func (v *quotaViews) take(bs []store.Bucket, now int64) {
	for i := range bs {
		vw := v.lookup(bs[i].Key)
		if vw == nil {
			continue
		}
		vw.touched.Store(now)
		// Load first: a Swap is a locked instruction, and a bucket with
		// nothing to report needs none.
		if vw.unsent.Load() == 0 {
			continue
		}
		if u := vw.unsent.Swap(0); u > 0 {
			bs[i].Sent = u
			if since := vw.unsentSince.Load(); now > since {
				vw.addDelay(float64(now-since) / 2)
			}
		}
	}
}

// addDelay moves the view's delay towards sample (ns) by reportDelayWeight.
func (vw *quotaView) addDelay(sample float64) {
	for {
		old := vw.delay.Load()
		d := math.Float64frombits(old)
		if vw.delay.CompareAndSwap(old, math.Float64bits(d+reportDelayWeight*(sample-d))) {
			return
		}
	}
}

// delayNs returns the view's delay (see quotaView.delay), in ns.
func (vw *quotaView) delayNs() float64 { return math.Float64frombits(vw.delay.Load()) }

// addUnsent adds units, sent at now, to what the view has to report, held
// to at most limit (none when limit < 0).
func (vw *quotaView) addUnsent(units, limit, now int64) {
	for {
		old := vw.unsent.Load()
		n := old + units
		if limit >= 0 {
			n = min(n, limit)
		}
		if old == 0 {
			// Before the units show, so that a take that sees them sees
			// when they left; a lost race leaves a time about now, of
			// units still to report.
			vw.unsentSince.Store(now)
		}
		if vw.unsent.CompareAndSwap(old, n) {
			return
		}
	}
}

// reportDelayWeight is the weight of one report in a view's delay: about
// the last ten reports.
const reportDelayWeight = 0.1

// untake puts back what take moved into bs, for the buckets the store did
// not count it in: all of them when r is nil (the call failed) or not
// booked, the deferred ones otherwise.
func (v *quotaViews) untake(bs []store.Bucket, r *store.Reservation, now int64) {
	for i := range bs {
		if bs[i].Sent > 0 && (r == nil || !r.Reported(i)) {
			v.report(&bs[i], bs[i].Sent, now)
		}
		bs[i].Sent = 0
	}
}

// departed records that a request of bs left at now: each bucket the server's
// answers have said something of (one with a view) has its cost to
// report, whether or not its reservation was counted: the store may have
// begun counting since (the first requests of a fleet are booked before
// any answer), and drops reports for a bucket it does not count.
//
// A bucket gets a view at its first departure, before any answer: the
// store begins counting at the first answer that reports a quota, and the
// requests sent before it (the start of a fleet: a whole wave of them
// while the first answers are slow to come) are reported with the next
// reservations, so that the first readings count them. Until the store
// counts the bucket, what waits to be reported is held to a window of the
// rule (Bucket.Rate and the burst): no more can have left in the window
// the first reading looks back over.
//
// The view is found and counted in without mu (see quotaViews); only the
// first departure of a bucket, or one that met a sweep of its view, locks.
func (v *quotaViews) departed(bs []store.Bucket, now int64) {
	for i := range bs {
		b := &bs[i]
		vw := v.lookup(b.Key)
		if vw != nil {
			vw.touched.Store(now)
			vw.addUnsent(b.Cost, departLimit(vw, b), now)
			if !vw.swept.Load() {
				continue
			}
			// Swept meanwhile: what it holds goes to the view that
			// replaces it.
		}
		v.mu.Lock()
		nv := v.viewLocked(b.Key, now)
		units := b.Cost
		if vw != nil && vw != nv {
			units = vw.unsent.Swap(0)
		}
		if vw != nv {
			nv.addUnsent(units, departLimit(nv, b), now)
		}
		v.mu.Unlock()
	}
}

// departLimit returns the most a departure leaves vw to report for b: a
// window of the rule until the store counts the bucket (see departed),
// else no limit (-1).
func departLimit(vw *quotaView, b *store.Bucket) int64 {
	if vw.counted.Load() {
		return -1
	}
	return b.Rate + b.Burst
}

func (v *quotaViews) report(b *store.Bucket, units, now int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reportLocked(b, units, now)
}

// reportLocked adds units, sent at now, to what b has to report. v.mu
// must be held.
func (v *quotaViews) reportLocked(b *store.Bucket, units, now int64) {
	vw := v.views[b.Key]
	if vw == nil {
		return
	}
	vw.addUnsent(units, -1, now)
}

// booked records a reservation made at now: a counted bucket's count goes
// into its ledger, and a pause the store reported (held) into every view
// of bs.
func (v *quotaViews) booked(bs []store.Bucket, r *store.Reservation, now int64) {
	if r.Held <= 0 && v.counted.Load() == 0 && !anyCounted(r) {
		// Nothing counted, here or before, and no pause: nearly every
		// reservation while no server reports a quota. No view changes.
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range bs {
		c := r.Count(i)
		vw := v.views[bs[i].Key]
		if vw != nil {
			vw.setCounted(v, c > 0)
		}
		if c <= 0 && r.Held <= 0 {
			continue
		}
		if vw == nil {
			vw = v.viewLocked(bs[i].Key, now)
		}
		vw.setCounted(v, c > 0)
		if c > 0 {
			vw.ledger.add(now-int64(vw.delayNs()), c, int64(vw.span(&bs[i]))/ledgerSamplesPerW)
		}
		if r.Held > 0 {
			vw.pausedUntil = max(vw.pausedUntil, store.SatAdd(now, int64(r.Held)))
		}
	}
}

// setCounted sets vw.counted, keeping v.counted. v.mu must be held.
func (vw *quotaView) setCounted(v *quotaViews, counted bool) {
	switch was := vw.counted.Swap(counted); {
	case counted && !was:
		v.counted.Add(1)
	case !counted && was:
		v.counted.Add(-1)
	}
}

// anyCounted reports whether r counts any bucket (see
// store.Reservation.Counts).
func anyCounted(r *store.Reservation) bool {
	for _, c := range r.Counts {
		if c > 0 {
			return true
		}
	}
	return false
}

// paused records a pause of bs until until.
func (v *quotaViews) paused(bs []store.Bucket, until, now int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range bs {
		vw := v.viewLocked(bs[i].Key, now)
		vw.pausedUntil = max(vw.pausedUntil, until)
	}
}

// recheck reports whether a waiter of bs departing at now should first ask
// the store for a pause: one of bs was paused within recheckAfterPause.
func (v *quotaViews) recheck(bs []store.Bucket, now int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range bs {
		if vw := v.views[bs[i].Key]; vw != nil && now < store.SatAdd(vw.pausedUntil, int64(recheckAfterPause)) {
			return true
		}
	}
	return false
}

// read works out what sig, the answer to a request booked as bk in bs,
// asks of the store at now.
func (v *quotaViews) read(bs []store.Bucket, bk booking, sig header.Signal, now int64) feedbackActions {
	var act feedbackActions
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
	for i := range bs {
		vws[i] = v.viewLocked(bs[i].Key, now)
		vws[i].detect(sig.Quotas, now)
	}
	act.pause = v.pauseLocked(vws, sig)
	if act.pause > 0 && act.pause < time.Duration(math.MaxInt64-now) {
		// The same pause told again: a wait in whole seconds rounds up,
		// so the requests already in flight into a pause come back naming
		// ends up to a second later than the first did. Extending by them
		// would hold the fleet up to a second past a pause that ended.
		end := now + int64(act.pause)
		told := true
		for _, vw := range vws {
			told = told && vw.pausedUntil > now && end <= vw.pausedUntil+int64(sameWaitSlack)
		}
		if told {
			act.pause = 0
		}
	}
	for i := range bs {
		spec, force, ok := vws[i].decide(&bs[i], bk.depart, bk.count(i) > 0, sig, now)
		if ok && vws[i].shouldSend(spec, force, &bs[i], now) {
			vws[i].sent, vws[i].sentAt = spec, now
			act.caps = append(act.caps, bucketCap{i: i, spec: spec})
		}
	}
	return act
}

// pauseLocked returns the pause sig asks of the fleet (0 for none) and
// keeps the views' count of rejections in a row. v.mu must be held.
func (v *quotaViews) pauseLocked(vws []*quotaView, sig header.Signal) time.Duration {
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
	case sig.HasRetryAfter:
		return wait
	case named && sig.Limited:
		return wait
	case named:
		// A success reporting nothing left: a fixed window stays empty
		// until its reset, a sliding one frees slots before it.
		for _, vw := range vws {
			if vw.fixed {
				return wait
			}
		}
		return 0
	case sig.Limited:
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
	return 0
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
	ruleRate := 1e9 / float64(b.Interval)
	countOnly := store.Cap{Span: countWindows * ruleWindow(b)}
	if !counted {
		// Count first, to read the next answers.
		if sig.Limited || requestQuotas(sig.Quotas) > 0 {
			return countOnly, false, true
		}
		return store.Cap{}, false, false
	}
	best, bestOK := store.Cap{}, false
	for i := range sig.Quotas {
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
			// What others spent in the span the count covers; in the first
			// window their spending so far is only part of what they will
			// spend in it, and what exceeds the reserve (the noise of one
			// reading against the ledger: whole requests, some in flight)
			// counts at a whole window's worth.
			others := max(float64(q.Limit-q.Remaining)-own, 0)
			if covered < int64(w) && others > reserve {
				others = reserve + (others-reserve)*float64(w)/float64(covered)
			}
			room := float64(q.Limit) - others - reserve
			c = store.Cap{Rate: room / w.Seconds(), Span: capWindows * w}
		}
		c.Rate = max(c.Rate, minUnitsPerWindow/w.Seconds())
		if c.Rate*w.Seconds()+deadBand >= ruleRate*w.Seconds()-1e-3 {
			// Within the dead band of the rule: the reserve's extra unit
			// is for a quota shared with others; alone, the rule is it.
			c.Rate = ruleRate
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
		// book again at the rate in force when it ends.
		return best, sig.Limited, true
	case requestQuotas(sig.Quotas) > 0 || !sig.Limited:
		return store.Cap{}, false, false
	}
	// A rejection with no quota report: see the file's comment.
	w := ruleWindow(b)
	own, covered, ok := vw.ledger.window(int64(w), depart)
	if !ok || refusal(own, time.Duration(covered), ruleRate) {
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
	return store.Cap{Rate: rate, Slope: slope, Span: max(span, countOnly.Span)}, true, true
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
func ruleWindow(b *store.Bucket) time.Duration { return max(b.Period, time.Millisecond) }

// quotaWindow returns q's window: the one the server names, else the time
// the rule takes to spend q's limit (the rule's period when the rule is the
// quota).
func quotaWindow(q *header.Quota, b *store.Bucket) time.Duration {
	if q.Window > 0 {
		return q.Window
	}
	w := float64(b.Period) * float64(q.Limit) / float64(max(b.Rate, 1))
	return time.Duration(min(max(w, float64(time.Millisecond)), float64(maxQuotaWindow)))
}

// ledger is a ring of (time, count) samples of one bucket, spaced so that
// ledgerSize of them span two of the rule's periods.
type ledger struct {
	t, n      [ledgerSize]int64
	head, len int
}

// add records that the bucket's count was n at t, unless the last sample
// is closer than spacing. A count lower than
// the last one means the store started counting afresh: the ledger does.
func (l *ledger) add(t, n, spacing int64) {
	if l.len > 0 {
		last := (l.head + l.len - 1) % ledgerSize
		switch {
		case n < l.n[last]:
			l.len = 0
		case t < l.t[last]+spacing:
			return
		}
	}
	i := (l.head + l.len) % ledgerSize
	if l.len == ledgerSize {
		l.head = (l.head + 1) % ledgerSize
	} else {
		l.len++
	}
	l.t[i], l.n[i] = t, n
}

// window returns the units sent in the w before t, and the span of it the
// count covers (less than w when the count began within it, see at). The
// samples reach to the newest one taken by t, at end; from there to t the
// count is carried on at the rate of the w before end. A full window
// slides with t, so what it lost at its start between end−w and t−w is
// taken off again: carrying on alone would count a window of w + (t−end),
// up to a sixteenth of a window's traffic too much, which is the reserve
// of a quota of 100 spent (the shared-quota run held the server's window
// at 99–100 that way). A replica whose waiters all sleep takes no sample
// until one of them is back, so the newest sample may be well before t;
// one older than w/maxStaleShare is too old to carry on (false), and so is
// a ledger that does not reach back over w.
func (l *ledger) window(w, t int64) (own float64, covered int64, ok bool) {
	if l.len == 0 {
		return 0, 0, false
	}
	end := int64(math.MinInt64)
	for k := l.len - 1; k >= 0; k-- {
		if ts := l.t[(l.head+k)%ledgerSize]; ts <= t {
			end = ts
			break
		}
	}
	if end == math.MinInt64 || t-end > w/maxStaleShare {
		return 0, 0, false
	}
	a, ok := l.at(end - w)
	if !ok {
		return 0, 0, false
	}
	b, _ := l.at(end)
	own = max(b-a, 0)
	if end-w >= l.t[l.head] {
		if t > end {
			left, _ := l.at(t - w)
			own = max(own+own*float64(t-end)/float64(w)-(left-a), 0)
		}
		return own, w, true
	}
	// The count began within the window (at the oldest sample, as at
	// found): the window is all of the count, and it grows with t. Over a
	// count that covers less than the staleness bound, its rate says too
	// little to carry on at all.
	covered = end - l.t[l.head]
	if covered >= w/maxStaleShare {
		own += own * float64(t-end) / float64(covered)
	}
	return own, max(covered, 1) + t - end, true
}

// minCoveredShare: a reading needs the count to cover at least this share
// of its window (1/8): over less, a reading against the ledger is mostly
// the noise of the requests in flight, and a replica that has just begun
// (an idle one's first request) has counted next to nothing.
const minCoveredShare = 8

// maxStaleShare bounds how far before a reading the newest sample may be,
// as a share of the window: a sixteenth of the window's traffic carried on
// at its mean rate errs by a little of that sixteenth.
const maxStaleShare = 16

// since returns the units sent after t, up to the newest sample.
func (l *ledger) since(t int64) (float64, bool) {
	a, ok := l.at(t)
	if !ok {
		return 0, false
	}
	return max(float64(l.n[(l.head+l.len-1)%ledgerSize])-a, 0), true
}

// at returns the count at t, interpolated between the samples around it
// (the newest after them); false when t is before the oldest sample,
// unless that sample was taken as the count began (its count at most
// countStart): nothing was counted before, so the count at t is its start.
// Counts come in fractions of a unit: rounding the ends of a window down
// errs by up to a unit, which is the whole reserve of a quota of 20.
func (l *ledger) at(t int64) (float64, bool) {
	if l.len == 0 {
		return 0, false
	}
	if t < l.t[l.head] {
		if l.n[l.head] <= countStart {
			return float64(min(l.n[l.head], 1)), true
		}
		return 0, false
	}
	prev := l.head
	for k := 1; k < l.len; k++ {
		i := (l.head + k) % ledgerSize
		if l.t[i] > t {
			span := l.t[i] - l.t[prev]
			if span <= 0 {
				return float64(l.n[prev]), true
			}
			return float64(l.n[prev]) + float64(l.n[i]-l.n[prev])*float64(t-l.t[prev])/float64(span), true
		}
		prev = i
	}
	return float64(l.n[prev]), true
}
