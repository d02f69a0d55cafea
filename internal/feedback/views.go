package feedback

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// Views is this process's reading of the server's quotas: one view per
// bucket key that a response has said something about. Safe for
// concurrent use; the zero Views is not usable, NewViews makes one.
//
// Every request takes and reports its units (Take, Departed), whether or
// not a server ever reported a quota, so those two take no lock: they find
// the view in index, without mu, and count in its atomics (quotaView.unsent
// and the fields beside it). Everything else is under mu.
type Views struct {
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
	// fleet returns the live replicas of the fleet (see CountFleet), or
	// nil when this process knows of no other.
	fleet func() int64
	// began is when this process took its first request's units (Take),
	// Unix ns, 0 before: before it the fleet's share here sent nothing,
	// so a window's part before a count that began late is uncounted
	// sending only from then on (see quotaView.uncounted).
	began atomic.Int64
}

// CountFleet gives the views the live replicas of the fleet, as a store's
// heartbeat counts them (0 while it cannot tell): a reading in its first
// window allows each other replica one request's units it has not
// reported yet (see quotaView.read). Call it before the views are used;
// it is not safe beside them.
func (v *Views) CountFleet(size func() int64) { v.fleet = size }

// peers returns the other live replicas of the fleet, 0 when unknown.
func (v *Views) peers() int64 {
	if v.fleet == nil {
		return 0
	}
	return max(v.fleet()-1, 0)
}

// quotaView is what this process knows of one bucket's quota at the server.
type quotaView struct {
	ledger ledger
	// resetAt is the quota's reset as first seen (Unix ns), since when,
	// and whether it stayed put long enough to call the window fixed.
	resetAt, resetSince int64
	fixed               bool
	// sliding is set when the bucket is a sliding log's or a sliding
	// counter's (see slidingWindow).
	sliding bool
	// peers is the other live replicas at the reading (Views.peers).
	peers int64
	// began is Views.began at the reading.
	began int64
	// strikes counts rejections in a row that named no wait.
	strikes int
	// pausedUntil is the end of the latest pause this process knows of
	// (Unix ns). An atomic: Take reads it without mu, to leave out of the
	// report delay the units a pause held (see Take).
	pausedUntil atomic.Int64
	// pausedFrom is when this process learnt of the pause that ends at
	// pausedUntil, or of the first of the pauses that extended one
	// another up to it (Unix ns): the pause's start, as far as it knows.
	pausedFrom int64
	// fullAt is the departure of the latest rejected request read as a
	// full window's (see fullWindow), 0 before any.
	fullAt int64
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
	// delay earlier, so the ledger dates it there (see Booked).
	unsentSince atomic.Int64
	delay       atomic.Uint64
	// touched is the last time the view was used, for sweeps; swept is
	// set once a sweep dropped the view, so that a departure that found it
	// in index just before reports into the view that replaces it.
	touched atomic.Int64
	swept   atomic.Bool
}

// NewViews returns an empty reading: no view of any quota.
func NewViews() *Views { return &Views{views: make(map[string]*quotaView)} }

// Booking is what a request's reservation tells the model: when it departs
// (Unix ns of the Transport's clock), each bucket's count (see
// store.Reservation.Counts; nil or 0 when not counted), and QueueFrom,
// from when the slots before Depart were all booked as it booked: the store's
// decision, or the end of a pause in force then (0 when the request did
// not wait). A request that waited departs at the end of a queue of
// others' slots; the fleet sent at its buckets' pace from QueueFrom to
// Depart (a pause told meanwhile sends the request back to book again, a
// new Booking). The zero Booking is a request the model knows nothing of:
// no departure, no queue, nothing counted. Marks, the store's marks of the
// booking (store.Reservation.Marks), rides along for the Transport's
// correction of the request's cost; the model does not read it.
type Booking struct {
	Depart    int64
	QueueFrom int64
	Counts    []int64
	Marks     []int64
}

// queueLen returns how long before its departure the request's slot was
// at the end of a queue (see Booking.QueueFrom): 0 when it did not wait.
func (bk Booking) queueLen() int64 {
	if bk.QueueFrom <= 0 || bk.Depart <= bk.QueueFrom {
		return 0
	}
	return bk.Depart - bk.QueueFrom
}

func (bk Booking) count(i int) int64 {
	if i < len(bk.Counts) {
		return bk.Counts[i]
	}
	return 0
}

// Actions is what a response asks of the store (see Views.Read). The zero
// Actions asks nothing.
type Actions struct {
	Pause time.Duration // pause every bucket of the request for this long (store.Store.Pause)
	Caps  []BucketCap   // cap these buckets (store.Store.Limit)
}

// BucketCap is a cap for one of the request's buckets.
type BucketCap struct {
	Bucket int       // the bucket's index in the request's buckets
	Cap    store.Cap // the cap, for store.Store.Limit
}

// viewLocked returns the view of key, made if needed. v.mu must be held.
func (v *Views) viewLocked(key string, now int64) *quotaView {
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
func (v *Views) lookup(key string) *quotaView {
	if vw, ok := v.index.Load(key); ok {
		return vw.(*quotaView)
	}
	return nil
}

// sweepLocked drops views unused for quotaViewIdleAfter, at most once per
// that time, so that partitioned buckets leave no trail. v.mu must be held.
func (v *Views) sweepLocked(now int64) {
	if now-v.sweptAt < int64(quotaViewIdleAfter) {
		return
	}
	for k, vw := range v.views {
		if now-vw.touched.Load() < int64(quotaViewIdleAfter) {
			continue
		}
		// A departure may have found vw in index and touched it since the
		// first look; it looks at swept after touching, so one of the two
		// sees the other (see Departed).
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
	// A map keeps the room of its largest size after its entries are
	// deleted: a million partitioned buckets gone idle held 53 MB here
	// (TestMemoryFlat) until the map is made anew, as the local store's
	// sweep does. (The index, a sync.Map, frees its nodes as they go.)
	live := make(map[string]*quotaView, len(v.views))
	for k, vw := range v.views {
		live[k] = vw
	}
	v.views = live
	v.sweptAt = now
}

// Take moves the units sent and not yet reported in bs's buckets into
// bs (store.Bucket.Sent), for the reservation about to be made at now.
func (v *Views) Take(bs []store.Bucket, now int64) {
	if v.began.Load() == 0 {
		v.began.CompareAndSwap(0, now)
	}
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
			// Units that left before a pause and are reported after it
			// waited for the pause, not for the reporting: a 3 s pause
			// made one sample of 1.5 s, which moved the delay 150 ms
			// and, as it decayed again, dated the readings after the
			// pause too early, so that the ledger read the fleet's own
			// count short by up to a third of a window
			// (TestReportDelayIgnoresPauses; docs/FEEDBACK.md).
			if since := vw.unsentSince.Load(); now > since && since >= vw.pausedUntil.Load() {
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

// Untake puts back what Take moved into bs, for the buckets the store did
// not count it in: all of them when r is nil (the call failed) or not
// booked, the deferred ones otherwise.
func (v *Views) Untake(bs []store.Bucket, r *store.Reservation, now int64) {
	for i := range bs {
		if bs[i].Sent > 0 && (r == nil || !r.Reported(i)) {
			v.report(&bs[i], bs[i].Sent, now)
		}
		bs[i].Sent = 0
	}
}

// Departed records that a request of bs left at now: each bucket the server's
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
// The view is found and counted in without mu (see Views); only the
// first departure of a bucket, or one that met a sweep of its view, locks.
func (v *Views) Departed(bs []store.Bucket, now int64) {
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
// window of the rule until the store counts the bucket (see Departed),
// else no limit (-1).
func departLimit(vw *quotaView, b *store.Bucket) int64 {
	if vw.counted.Load() {
		return -1
	}
	return b.Rate + b.Burst
}

func (v *Views) report(b *store.Bucket, units, now int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reportLocked(b, units, now)
}

// reportLocked adds units, sent at now, to what b has to report. v.mu
// must be held.
func (v *Views) reportLocked(b *store.Bucket, units, now int64) {
	vw := v.views[b.Key]
	if vw == nil {
		return
	}
	vw.addUnsent(units, -1, now)
}

// Booked records a reservation asked for at sent and answered at now: a
// counted bucket's count goes into its ledger, and a pause the store
// reported (held) into every view of bs.
func (v *Views) Booked(bs []store.Bucket, r *store.Reservation, sent, now int64) {
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
			vw.ledger.add(now-int64(vw.delayNs()), c, int64(vw.span(&bs[i]))/ledgerSamplesPerW, now-sent)
		}
		if r.Held > 0 {
			vw.notePause(now, store.SatAdd(now, int64(r.Held)))
		}
	}
}

// setCounted sets vw.counted, keeping v.counted. v.mu must be held.
func (vw *quotaView) setCounted(v *Views, counted bool) {
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

// Paused records a pause of bs until until (of their keys only: a pause
// another replica published names keys), so that the same pause told again
// later does not extend it.
func (v *Views) Paused(bs []store.Bucket, until, now int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range bs {
		vw := v.viewLocked(bs[i].Key, now)
		vw.notePause(now, until)
	}
}

// notePause records a pause until until that this process learnt of at
// now: it moves vw.pausedUntil to until if that is later, and
// vw.pausedFrom to now unless the pause extends one still in force.
// v.mu must be held (pausedUntil is an atomic for Take's reads only).
func (vw *quotaView) notePause(now, until int64) {
	old := vw.pausedUntil.Load()
	if until <= old {
		return
	}
	if now > old {
		vw.pausedFrom = now
	}
	vw.pausedUntil.Store(until)
}

// Recheck reports whether a waiter of bs departing at now should first ask
// the store for a pause: one of bs was paused within recheckAfterPause.
func (v *Views) Recheck(bs []store.Bucket, now int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range bs {
		if vw := v.views[bs[i].Key]; vw != nil && now < store.SatAdd(vw.pausedUntil.Load(), int64(recheckAfterPause)) {
			return true
		}
	}
	return false
}
