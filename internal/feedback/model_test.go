package feedback

import (
	"math"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/store"
)

// quotaBucket is a bucket of a rule of 100 per second, burst 1, at the
// default headroom: a rule equal to a quota of 100 per second.
func quotaBucket() store.Bucket {
	// As the root compiles Limit{Rate: 100, Period: time.Second, Burst: 1}
	// at the root's default headroom (defaultHeadroom, documented by WithHeadroom): Period / (Rate·(1-headroom)).
	headroom := 0.02
	return store.Bucket{Key: "api", Rule: "api", Interval: time.Duration(float64(time.Second) / (100 * (1 - headroom))), Burst: 1, Cost: 1,
		Rate: 100, Period: time.Second, Headroom: headroom}
}

// fill gives vw a ledger in which the fleet sent perSecond units a second,
// evenly, from from to to (Unix ns), sampled every 10 ms, the count
// starting at start.
func fill(vw *quotaView, b *store.Bucket, start int64, from, to int64, perSecond float64) {
	spacing := int64(vw.span(b)) / ledgerSamplesPerW
	for t := from; t <= to; t += int64(10 * time.Millisecond) {
		vw.ledger.add(t, start+int64(math.Round(perSecond*float64(t-from)/1e9)), spacing, 0)
	}
}

func xrl(limit, remaining int64, reset time.Duration) header.Quota {
	return header.Quota{Name: "requests", Unit: "requests", Limit: limit, Remaining: remaining, HasLimit: true, HasRemaining: true, Reset: reset, HasReset: true}
}

func TestQuotaViewDecide(t *testing.T) {
	sec := int64(time.Second)
	b := quotaBucket()
	ruleRate := 1e9 / float64(b.Interval)
	for _, tc := range []struct {
		name    string
		sig     header.Signal
		own     float64 // units a second the fleet sent over the last 2 s
		pausedS float64 // a pause ended this many seconds before the reading
		want    float64 // the cap's rate; 0: count only (no cap)
		none    bool    // nothing to send
		force   bool
		slope   bool
		window  time.Duration // the ledger's spacing; the rule's period when 0
	}{
		{name: "alone at the quota: the rule", sig: header.Signal{Quotas: []header.Quota{xrl(100, 2, time.Second)}}, own: 98, want: 0},
		{name: "alone, a jitter reading one low: the rule (dead band)", sig: header.Signal{Quotas: []header.Quota{xrl(100, 1, time.Second)}}, own: 98, want: 0},
		{name: "a reading two low: a cap", sig: header.Signal{Quotas: []header.Quota{xrl(100, 0, time.Second)}}, own: 98, want: 95},
		{name: "below the quota: the rule", sig: header.Signal{Quotas: []header.Quota{xrl(100, 50, time.Second)}}, own: 50, want: 0},
		{name: "an outside consumer of 30/s: what remains", sig: header.Signal{Quotas: []header.Quota{xrl(100, 2, time.Second)}}, own: 68, want: 67},
		{name: "overshooting: the room is what it sent and what is left", sig: header.Signal{Quotas: []header.Quota{xrl(100, 0, time.Second)}}, own: 90, want: 87},
		{name: "IETF window names W", sig: header.Signal{Quotas: []header.Quota{{Name: "default", Unit: "requests", Limit: 1000, Remaining: 20, HasLimit: true, HasRemaining: true, Window: 10 * time.Second}}}, own: 68, want: (680 + 20 - 21) / 10.0, window: 10 * time.Second},
		{name: "a token quota is not read", sig: header.Signal{Quotas: []header.Quota{{Name: "tokens", Unit: "tokens", Limit: 100, Remaining: 0, HasLimit: true, HasRemaining: true}}}, own: 98, none: true},
		{name: "rejection with the quota spent", sig: header.Signal{Limited: true, Quotas: []header.Quota{xrl(100, 0, time.Second)}}, own: 80, want: 77, force: true},
		{name: "rejection while the fleet sent little: a refusal", sig: header.Signal{Limited: true, Quotas: []header.Quota{xrl(100, 0, time.Second)}}, own: 20, none: true},
		{name: "bare rejection: what it sent, climbing", sig: header.Signal{Limited: true}, own: 80, want: 78, force: true, slope: true},
		{name: "bare rejection at the rule: count only", sig: header.Signal{Limited: true}, own: 101, want: 0},
		{name: "bare rejection while paused: a refusal", sig: header.Signal{Limited: true}, own: 30, none: true},
		{name: "plain success: nothing", sig: header.Signal{}, own: 98, none: true},
		{name: "floor: a few a window", sig: header.Signal{Quotas: []header.Quota{xrl(100, 0, time.Second)}}, own: 0, want: minUnitsPerWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := 30 * sec
			vw := &quotaView{window: tc.window}
			fill(vw, &b, 1000, now-20*sec, now, tc.own)
			spec, force, ok := vw.decide(&b, now, true, tc.sig, now)
			if tc.none {
				if ok {
					t.Fatalf("decide = %+v, want nothing", spec)
				}
				return
			}
			if !ok {
				t.Fatal("decide said nothing")
			}
			if math.Abs(spec.Rate-tc.want) > 1 {
				t.Errorf("rate = %.2f, want %.2f (rule %.2f)", spec.Rate, tc.want, ruleRate)
			}
			if force != tc.force {
				t.Errorf("force = %v, want %v", force, tc.force)
			}
			if (spec.Slope > 0) != tc.slope {
				t.Errorf("slope = %v", spec.Slope)
			}
			if tc.want == 0 && spec.Span != countWindows*ruleWindow(&b) {
				t.Errorf("count only for %v, want %v", spec.Span, countWindows*ruleWindow(&b))
			}
			if spec.Span <= 0 {
				t.Errorf("span = %v", spec.Span)
			}
		})
	}
}

func TestQuotaViewUncounted(t *testing.T) {
	b := quotaBucket()
	vw := &quotaView{}
	for _, sig := range []header.Signal{{Quotas: []header.Quota{xrl(100, 2, time.Second)}}, {Limited: true}} {
		spec, _, ok := vw.decide(&b, 0, false, sig, 0)
		if !ok || spec.Rate != 0 || spec.Span != countWindows*time.Second {
			t.Errorf("%+v: decide = %+v, %v; want counting to start", sig, spec, ok)
		}
	}
	if _, _, ok := vw.decide(&b, 0, false, header.Signal{}, 0); ok {
		t.Error("a plain success started counting")
	}
}

// TestQuotaViewBareRejectionCountBegunLate: a bare rejection read over a
// count that began within its window (counting starts at a first reading,
// or afresh after a Redis restart) takes the window's part before the
// count at the rule's pace, from this process's first request on and
// after any pause: 32 units counted over 240 ms are not a fleet of 32 a
// window (the outage matrix's use-after, 2026-12-05), while a fleet that
// began with the count, or was paused before it, is read on its count
// (others took the rest of the window).
func TestQuotaViewBareRejectionCountBegunLate(t *testing.T) {
	sec, ms := int64(time.Second), int64(time.Millisecond)
	b := quotaBucket()
	ruleRate := 1e9 / float64(b.Interval)
	now := 30 * sec
	for _, tc := range []struct {
		name          string
		began, paused int64 // Unix ns; 0: none
		perSecond     float64
		want          float64 // the cap's rate; 0: count only; < 0: nothing
	}{
		{name: "sending long before the count: the window at the rule's pace, less the headroom", began: 10 * sec, perSecond: 98,
			want: 98*0.24 + ruleRate*0.76 - b.Headroom*100},
		{name: "sending long before, counting 240 ms of half the pace: a mild cut, not a crawl", began: 10 * sec, perSecond: 49,
			want: 49*0.24 + ruleRate*0.76 - b.Headroom*100},
		{name: "the fleet began with the count: the count is the window", began: now - 240*ms, perSecond: 98, want: 98*0.24 - b.Headroom*100},
		{name: "the fleet began 500 ms before the count: that part at the rule's pace", began: now - 740*ms, perSecond: 98,
			want: 98*0.24 + ruleRate*0.5 - b.Headroom*100},
		{name: "a pause ended as the count began: the count is the window", began: 10 * sec, paused: now - 240*ms, perSecond: 98, want: 98*0.24 - b.Headroom*100},
		{name: "no first request known: the count alone", perSecond: 98, want: 98*0.24 - b.Headroom*100},
		{name: "a refusal (the fleet sent little) stays one after it began", began: now - 240*ms, perSecond: 30, want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vw := &quotaView{began: tc.began}
			vw.pausedUntil.Store(tc.paused)
			fill(vw, &b, 0, now-240*ms, now, tc.perSecond)
			spec, _, ok := vw.decide(&b, now, true, header.Signal{Limited: true}, now)
			switch {
			case tc.want < 0:
				if ok {
					t.Fatalf("decide = %+v, want nothing (a refusal)", spec)
				}
			case !ok:
				t.Fatal("decide said nothing")
			case math.Abs(spec.Rate-tc.want) > 1:
				t.Errorf("rate = %.2f, want %.2f (rule %.2f)", spec.Rate, tc.want, ruleRate)
			}
		})
	}
}

// TestQuotaViewProbeRejection: a bare rejection naming no wait, of a
// request that left after a pause began less than a window before, is the
// no-wait backoff's probe and caps nothing (the fleet's count fell because
// the fleet was held); the rejection of a request that left before the
// pause, one naming a wait, and one a window after the pause are read.
func TestQuotaViewProbeRejection(t *testing.T) {
	sec, ms := int64(time.Second), int64(time.Millisecond)
	b := quotaBucket()
	now := 30 * sec
	bare := header.Signal{Limited: true}
	named := header.Signal{Limited: true, HasRetryAfter: true, RetryAfter: time.Second}
	for _, tc := range []struct {
		name       string
		pausedFrom int64
		depart     int64
		sig        header.Signal
		wantCap    bool
	}{
		{name: "a probe after the backoff's pause", pausedFrom: now - 300*ms, depart: now, sig: bare},
		{name: "in flight when the pause began: read", pausedFrom: now - 300*ms, depart: now - 301*ms, sig: bare, wantCap: true},
		{name: "naming a wait: read", pausedFrom: now - 300*ms, depart: now, sig: named, wantCap: true},
		{name: "a window after the pause: read", pausedFrom: now - 1100*ms, depart: now, sig: bare, wantCap: true},
		{name: "no pause known: read", depart: now, sig: bare, wantCap: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vw := &quotaView{began: 1}
			if tc.pausedFrom > 0 {
				vw.notePause(tc.pausedFrom, tc.pausedFrom+int64(noWaitPause))
			}
			fill(vw, &b, 1000, now-20*sec, now, 80)
			spec, _, ok := vw.decide(&b, tc.depart, true, tc.sig, now)
			if got := ok && spec.Rate > 0; got != tc.wantCap {
				t.Errorf("decide = %+v, %v; want a cap: %v", spec, ok, tc.wantCap)
			}
		})
	}
}

// TestQuotaViewFirstWindow: in the count's first window nothing the
// fleet sent has left the server's window, so what it sent beyond the
// cap's pace is a debt, to be paid once; a fleet alone, or one past its
// first window, owes none. Each other live replica may hold one request's
// units it has not reported yet (see read): the units seven idle peers
// sent are no one else's, and scaled to a window they would cap the
// fleet; later windows read them unscaled.
func TestQuotaViewFirstWindow(t *testing.T) {
	ms := int64(time.Millisecond)
	b := quotaBucket()
	for _, tc := range []struct {
		name      string
		from      int64   // the count began this long before the reading
		own       float64 // units a second the fleet sent
		remaining int64
		peers     int64
		wantRate  float64 // 0: no cap, the rule
		wantDebt  float64
	}{
		// 250 ms at 98/s: own 25 (the ledger counts whole units); an
		// outside consumer spent 7, so R = 68. Others beyond the
		// reserve of 3 count at a window's worth: 3 + 4·4 = 19, the room
		// 78 a window, and 25 − 78·0.25 = 5.5 were sent beyond it.
		{name: "shared, first window", from: 250 * ms, own: 98, remaining: 68, wantRate: 78, wantDebt: 5.5},
		// Alone: R = 75 leaves the rule, and a rule owes nothing.
		{name: "alone, first window", from: 250 * ms, own: 98, remaining: 75, wantRate: 0, wantDebt: 0},
		// A full window: own 68, others 30, the room 67 a window;
		// nothing of the start is left in it.
		{name: "shared, a later window", from: 3000 * ms, own: 68, remaining: 2, wantRate: 67, wantDebt: 0},
		// The first reading again, the server's 7 more one per peer.
		{name: "seven idle peers, first window", from: 250 * ms, own: 98, remaining: 68, peers: 7, wantRate: 0, wantDebt: 0},
		// Beyond one request a peer, the rest is others', scaled: 3 +
		// (7 − 3 − 3)·4 = 7, the room 90 a window.
		{name: "three peers, first window", from: 250 * ms, own: 98, remaining: 68, peers: 3, wantRate: 90, wantDebt: 2.5},
		// A later window reads others' 30 whatever the peers.
		{name: "seven peers, a later window", from: 3000 * ms, own: 68, remaining: 2, peers: 7, wantRate: 67, wantDebt: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := 30 * int64(time.Second)
			vw := &quotaView{peers: tc.peers}
			fill(vw, &b, 1, now-tc.from, now, tc.own)
			spec, _, ok := vw.decide(&b, now, true, header.Signal{Quotas: []header.Quota{xrl(100, tc.remaining, time.Second)}}, now)
			if !ok {
				t.Fatal("decide said nothing")
			}
			if math.Abs(spec.Rate-tc.wantRate) > 1 || math.Abs(spec.Debt-tc.wantDebt) > 0.5 {
				t.Errorf("cap %.2f/s, debt %.2f; want %.2f/s, %.2f", spec.Rate, spec.Debt, tc.wantRate, tc.wantDebt)
			}
		})
	}
	// A debt is never more than the rest of the window can pay: past its
	// end, what the fleet sent early has left the server's window.
	if d := firstWindowDebt(90, int64(900*time.Millisecond), time.Second, 8); d != 0.8 {
		t.Errorf("debt %.3f, want the 0.8 that 100 ms at 8/s pays", d)
	}
}

// TestQuotaViewFixedWindow: a reset that stays put for longer than its
// rounding can explain makes the window fixed; what remains is then spread
// until the reset, and a success reporting none left pauses until it.
func TestQuotaViewFixedWindow(t *testing.T) {
	sec := int64(time.Second)
	b := quotaBucket()
	for _, tc := range []struct {
		name  string
		reset func(now int64) time.Duration // as the server reports it
		fixed bool
	}{
		{"fixed, exact", func(now int64) time.Duration { return time.Duration(60*sec - now) }, true},
		{"fixed, Unix seconds rounded up", func(now int64) time.Duration {
			return time.Duration(60*sec-now) + time.Duration(sec-(60*sec-now)%sec)%time.Duration(sec)
		}, true},
		{"fixed, delta seconds rounded up", func(now int64) time.Duration {
			d := 60*sec - now
			return time.Duration((d + sec - 1) / sec * sec)
		}, true},
		{"sliding: the reset moves with every answer", func(int64) time.Duration { return time.Second }, false},
		{"sliding, 10 s window: the oldest leaves later", func(now int64) time.Duration { return time.Duration(sec - now%sec) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vw := &quotaView{}
			for now := int64(0); now <= 5*sec; now += 50 * int64(time.Millisecond) {
				vw.detect([]header.Quota{xrl(1000, 500, tc.reset(now))}, now)
			}
			if vw.fixed != tc.fixed {
				t.Fatalf("fixed = %v, want %v", vw.fixed, tc.fixed)
			}
		})
	}

	// Fixed: 300 left 50 s before the reset, 100 sent since the reading.
	now := 10 * sec
	vw := &quotaView{fixed: true}
	fill(vw, &b, 1000, now-2*sec, now, 50)
	sig := header.Signal{Quotas: []header.Quota{xrl(12000, 400, 50*time.Second)}}
	spec, _, ok := vw.decide(&b, now-2*sec, true, sig, now)
	// Spread over 49 s: the reset's second of rounding errs towards the quota.
	want := max((400-0.02*12000-1-100)/49.0, minUnitsPerWindow/120.0) // the rule takes 120 s to spend 12000
	if !ok || math.Abs(spec.Rate-want) > 0.01 || spec.Span != 49*time.Second {
		t.Errorf("fixed spread = %+v, want %.2f/s for 49s", spec, want)
	}

	views := NewViews()
	views.views["api"] = &quotaView{fixed: true}
	bs := []store.Bucket{b}
	exhausted := header.Signal{Quotas: []header.Quota{xrl(100, 0, 20*time.Second)}}
	if act := views.Read(bs, Booking{}, exhausted, now); act.Pause != 20*time.Second {
		t.Errorf("fixed, none left: pause %v, want 20s", act.Pause)
	}
	views.views["api"].fixed = false
	if act := views.Read(bs, Booking{}, header.Signal{Quotas: []header.Quota{xrl(100, 0, time.Second)}}, now); act.Pause != 0 {
		t.Errorf("sliding, none left on a success: pause %v, want none", act.Pause)
	}
}

// TestQuotaViewNoWaitBackoff: rejections that name no wait pause the fleet
// for a backoff that doubles while they continue, and starts again after a
// success.
func TestQuotaViewNoWaitBackoff(t *testing.T) {
	views := NewViews()
	bs := []store.Bucket{quotaBucket()}
	rejected := header.Signal{Limited: true, Reason: "global-rate"}
	var got []time.Duration
	for range 6 {
		got = append(got, views.Read(bs, Booking{}, rejected, 0).Pause)
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pauses %v, want %v", got, want)
		}
	}
	views.Read(bs, Booking{}, header.Signal{}, 0) // a success
	if views.struck.Load() != 0 {
		t.Error("a success left strikes")
	}
	if d := views.Read(bs, Booking{}, rejected, 0).Pause; d != noWaitPause {
		t.Errorf("after a success: %v, want %v", d, noWaitPause)
	}
	named := header.Signal{Limited: true, RetryAfter: 3 * time.Second, HasRetryAfter: true}
	if d := views.Read(bs, Booking{}, named, 0).Pause; d != 3*time.Second {
		t.Errorf("named wait: %v", d)
	}
	views.Paused(bs, int64(3*time.Second), 0)
	// 2.5 s later a request that was in flight names 1 s (rounded up from
	// 0.5 s): the same pause, not a longer one.
	if d := views.Read(bs, Booking{}, header.Signal{Limited: true, RetryAfter: time.Second, HasRetryAfter: true}, int64(2500*time.Millisecond)).Pause; d != 0 {
		t.Errorf("the same pause told again: %v, want none", d)
	}
	// After it, a wait is a new pause: 2 s, more than a second and more
	// than the 1 s window, honoured whole.
	if d := views.Read(bs, Booking{}, header.Signal{Limited: true, RetryAfter: 2 * time.Second, HasRetryAfter: true}, int64(3100*time.Millisecond)).Pause; d != 2*time.Second {
		t.Errorf("a pause after the first: %v, want 2s", d)
	}
}

// TestQuotaViewWholeSecondWait: a rejection's Retry-After of whole seconds
// within the window, of a window not known to be fixed, that is a full
// window's (the ledger says so, or where it cannot tell, the rejection
// reports its quota spent, or the request left at the end of a queue of
// half the window, or a full window was read less than half a window
// before), pauses for its lower bound (a second less) and at
// least the no-wait backoff; a wait longer than the window, a fractional
// one, a fixed window's, a refusal's and a bare one the model cannot
// place are honoured whole.
func TestQuotaViewWholeSecondWait(t *testing.T) {
	ms := int64(time.Millisecond)
	oneSecond := header.Signal{Limited: true, RetryAfter: time.Second, HasRetryAfter: true}
	read := func(views *Views, sig header.Signal, now int64) time.Duration {
		return views.Read([]store.Bucket{quotaBucket()}, Booking{Depart: now}, sig, now).Pause
	}
	if d := read(NewViews(), oneSecond, 0); d != time.Second {
		t.Errorf("a bare 1s, nothing known: %v, want it whole", d)
	}
	// Nothing in the ledger, but the request left at the end of a queue:
	// of half the window, the fleet was sending at its pace (a full
	// window's); of less, it may have just begun (whole).
	queued := func(q time.Duration) time.Duration {
		now := int64(5 * time.Second)
		bk := Booking{Depart: now, QueueFrom: now - int64(q)}
		return NewViews().Read([]store.Bucket{quotaBucket()}, bk, oneSecond, now).Pause
	}
	if d := queued(600 * time.Millisecond); d != noWaitPause {
		t.Errorf("a bare 1s after a queue of 600ms: %v, want the backoff's %v", d, noWaitPause)
	}
	if d := queued(500 * time.Millisecond); d != noWaitPause {
		t.Errorf("a bare 1s after a queue of 500ms: %v, want the backoff's %v", d, noWaitPause)
	}
	if d := queued(400 * time.Millisecond); d != time.Second {
		t.Errorf("a bare 1s after a queue of 400ms: %v, want it whole", d)
	}
	// A full window read less than half a window before: still full (the
	// backoff it earned cannot have emptied it), past that the model
	// cannot tell.
	recent := NewViews()
	bare := func(depart, queueFrom int64) time.Duration {
		bk := Booking{Depart: depart, QueueFrom: queueFrom}
		return recent.Read([]store.Bucket{quotaBucket()}, bk, oneSecond, depart).Pause
	}
	if d := bare(5000*ms, 4400*ms); d != noWaitPause {
		t.Errorf("a bare 1s after a queue of 600ms: %v, want the backoff's %v", d, noWaitPause)
	}
	if d := bare(5400*ms, 0); d != 2*noWaitPause {
		t.Errorf("a bare 1s 400ms after a full window's: %v, want the second backoff's %v", d, 2*noWaitPause)
	}
	if d := bare(6000*ms, 0); d != time.Second {
		t.Errorf("a bare 1s 600ms after a full window's: %v, want it whole", d)
	}
	// A request that left long before the full window's (a slow answer)
	// is no nearer to it.
	if d := bare(4800*ms, 0); d != time.Second {
		t.Errorf("a bare 1s that left 600ms before a full window's: %v, want it whole", d)
	}
	exhausted := oneSecond
	exhausted.Quotas = []header.Quota{{Name: "requests", Limit: 100, Remaining: 0, HasLimit: true, HasRemaining: true}}
	if d := read(NewViews(), exhausted, 0); d != noWaitPause {
		t.Errorf("1s of a quota reported spent, nothing known: %v, want the backoff's %v", d, noWaitPause)
	}
	if d := read(NewViews(), header.Signal{Limited: true, RetryAfter: 1500 * time.Millisecond, HasRetryAfter: true}, 0); d != 1500*time.Millisecond {
		t.Errorf("a fractional wait: %v, want it whole", d)
	}
	if d := read(NewViews(), header.Signal{Limited: true, RetryAfter: 3 * time.Second, HasRetryAfter: true}, 0); d != 3*time.Second {
		t.Errorf("3s, beyond the 1s window: %v, want it whole", d)
	}
	fixed := NewViews()
	fixed.viewLocked("api", 0).fixed = true
	if d := read(fixed, oneSecond, 0); d != time.Second {
		t.Errorf("a fixed window's: %v, want 1s", d)
	}
	// A fleet that sent 10 units in the window before, of a rule of 100/s:
	// a refusal.
	refused := NewViews()
	vw := refused.viewLocked("api", 0)
	for i := int64(0); i <= 10; i++ {
		vw.ledger.add(i*100*ms, 1+i, 30*ms, 0)
	}
	if d := read(refused, oneSecond, 1000*ms); d != time.Second {
		t.Errorf("a refusal's: %v, want 1s", d)
	}
	// The same at its rule: a full window.
	full := NewViews()
	vw = full.viewLocked("api", 0)
	for i := int64(0); i <= 10; i++ {
		vw.ledger.add(i*100*ms, 1+10*i, 30*ms, 0)
	}
	if d := read(full, oneSecond, 1000*ms); d != noWaitPause {
		t.Errorf("a full window's: %v, want %v", d, noWaitPause)
	}
	// A ledger that sent little because the backoff held the fleet: the
	// request left after a pause began within the window, so the ledger
	// cannot tell a refusal, and a full window read 200 ms before still
	// stands (8x16 retry-after outside, 2026-12-06: the fifth rejection of
	// a row, after four 50 ms backoffs, had its 1s honoured whole).
	held := NewViews()
	heldFull := func(depart int64) time.Duration {
		return held.Read([]store.Bucket{quotaBucket()}, Booking{Depart: depart, QueueFrom: depart - 600*ms}, oneSecond, depart).Pause
	}
	if d := heldFull(800 * ms); d != noWaitPause {
		t.Errorf("a bare 1s after a queue of 600ms: %v, want the backoff's %v", d, noWaitPause)
	}
	vw = held.viewLocked("api", 0)
	for i := int64(0); i <= 10; i++ {
		vw.ledger.add(800*ms+i*20*ms, 1+i/5, 10*ms, 0)
	}
	held.Paused([]store.Bucket{quotaBucket()}, 850*ms, 800*ms)
	if d := read(held, oneSecond, 1000*ms); d != 2*noWaitPause {
		t.Errorf("a bare 1s of a fleet held by the backoff: %v, want the second backoff's %v", d, 2*noWaitPause)
	}
}

func TestLedger(t *testing.T) {
	ms := int64(time.Millisecond)
	var l ledger
	if _, _, ok := l.window(1000*ms, 0); ok {
		t.Error("empty ledger answered")
	}
	for i := int64(0); i <= 60; i++ {
		l.add(1000*ms+i*40*ms, 50+4*i, 10*ms, 0) // 100 units a second from count 50
	}
	if n, ok := l.at(1500 * ms); !ok || n != 100 {
		t.Errorf("at 1.5s = %v, %v; want 100", n, ok)
	}
	if n, c, ok := l.window(1000*ms, 3000*ms); !ok || n != 100 || c != 1000*ms {
		t.Errorf("window = %v, %v; want 100", n, ok)
	}
	// Past the newest sample the count is carried on at the window's rate,
	// and the window slides with it: at a steady 100 a second it still
	// holds 100 (carrying on alone would count 1.03 s: 103).
	if n, c, ok := l.window(1000*ms, 3030*ms); !ok || n != 100 || c != 1000*ms {
		t.Errorf("window ending between samples = %v over %v, %v; want 100 over 1s", n, time.Duration(c), ok)
	}
	if _, _, ok := l.window(1000*ms, 3500*ms); ok {
		t.Errorf("window ending 100 ms after the newest sample answered")
	}
	if n, ok := l.since(2400 * ms); !ok || n != 100 {
		t.Errorf("since = %v, %v; want 100", n, ok)
	}
	if _, ok := l.at(500 * ms); ok {
		t.Error("before the oldest sample of a count begun earlier")
	}
	// The ring keeps the newest ledgerSize samples.
	for i := int64(61); i <= 70; i++ {
		l.add(1000*ms+i*40*ms, 50+4*i, 10*ms, 0)
	}
	if l.len != ledgerSize {
		t.Errorf("len = %d", l.len)
	}
	// A lower count starts afresh, and a ledger that saw its count begin
	// counts nothing before it.
	l.add(5000*ms, 1, 10*ms, 0)
	l.add(5100*ms, 11, 10*ms, 0)
	if l.len != 2 {
		t.Errorf("after a restart len = %d", l.len)
	}
	if n, c, ok := l.window(1000*ms, 5100*ms); !ok || n != 10 || c != 100*ms {
		t.Errorf("window from the count's start = %v over %v, %v; want 10 over 100ms", n, time.Duration(c), ok)
	}
	// Samples closer than the spacing are dropped.
	l.add(5105*ms, 12, 10*ms, 0)
	if l.len != 2 {
		t.Errorf("a sample within the spacing was kept")
	}
}

// TestSlidingBucketReadsOnlyRejections: a sliding log's or sliding
// counter's bucket keeps the server's window itself, so a success
// reporting room, even too little, caps nothing and pauses nothing (see
// slidingWindow); a rejection caps it as any bucket.
func TestSlidingBucketReadsOnlyRejections(t *testing.T) {
	sec := int64(time.Second)
	for _, alg := range []store.Algorithm{store.SlidingLog, store.SlidingCounter} {
		b := quotaBucket()
		b.Algorithm, b.Burst = alg, 100
		if alg == store.SlidingLog {
			b.Period = time.Second + 20*time.Millisecond
		}
		now := 30 * sec
		vw := &quotaView{sliding: true}
		fill(vw, &b, 1000, now-20*sec, now, 60)
		if spec, _, ok := vw.decide(&b, now, true, header.Signal{Quotas: []header.Quota{xrl(100, 0, time.Second)}}, now); ok {
			t.Errorf("%v: a success reporting nothing left gave %+v, want nothing", alg, spec)
		}
		spec, force, ok := vw.decide(&b, now, true, header.Signal{Limited: true, Quotas: []header.Quota{xrl(100, 0, time.Second)}}, now)
		if !ok || !force || spec.Rate <= 0 || spec.Rate >= 1e9/float64(b.Interval) {
			t.Errorf("%v: a rejection gave %+v (force %v, ok %v), want a cap below the rule", alg, spec, force, ok)
		}
	}
}

// TestRulePeriodOfASlidingLog: the server's window, when it names none,
// is the rule's Period as written, not the sliding log's longer window.
func TestRulePeriodOfASlidingLog(t *testing.T) {
	b := quotaBucket()
	b.Algorithm, b.Burst, b.Period = store.SlidingLog, 100, time.Second+20*time.Millisecond
	if got := rulePeriod(&b); got < time.Second-time.Microsecond || got > time.Second+time.Microsecond {
		t.Errorf("rulePeriod = %v, want 1s", got)
	}
	b.Algorithm = store.FixedWindow
	if got := rulePeriod(&b); got != b.Period {
		t.Errorf("a fixed window's rulePeriod = %v, want its Period %v", got, b.Period)
	}
}

// TestQuotaViewDecideSlack: a reading whose room comes within what its
// ledger cannot tell of the rule (a window's start across a gap in the
// samples, a newest sample read by a slow store call) says nothing, as
// the rules alone would; one whose room lies beyond it caps as before.
func TestQuotaViewDecideSlack(t *testing.T) {
	ms := int64(time.Millisecond)
	b := quotaBucket()
	now := 30000 * ms
	// bursty gives vw the ledger of a replica that books in turns: samples
	// every 40 ms (more than the spacing, so that each is kept) except over
	// gap around the window's start and over u before the newest sample,
	// the fleet sending perSecond, and the newest sample read by a store
	// call of u.
	bursty := func(perSecond float64, gap, u int64) *quotaView {
		vw := &quotaView{}
		spacing := int64(vw.span(&b)) / ledgerSamplesPerW
		count := func(t int64) int64 { return 1000 + int64(math.Round(perSecond*float64(t)/1e9)) }
		start := now - 1000*ms
		for t := now - 2000*ms; t <= now; t += 40 * ms {
			switch {
			case t > start-gap/2 && t < start+gap/2, t < now && t > now-u:
				continue
			case t == now:
				// The call's count is of its start, u before its answer.
				vw.ledger.add(t, count(t-u), spacing, u)
			default:
				vw.ledger.add(t, count(t), spacing, 0)
			}
		}
		return vw
	}
	for _, tc := range []struct {
		name      string
		perSecond float64
		remaining int64
		gap, u    int64
		want      float64 // the cap's rate; 0: the rule; −1: nothing
	}{
		{name: "no gap, alone: the rule", perSecond: 98, remaining: 2, want: 0},
		{name: "no gap, alone, a reading two low: a cap", perSecond: 98, remaining: 0, want: 95},
		{name: "a gap, alone, a reading two low: nothing", perSecond: 98, remaining: 0, gap: 400 * ms, want: -1},
		{name: "a slow call hides a cut: nothing", perSecond: 98, remaining: 2, u: 300 * ms, want: -1},
		{name: "a slow call beside an outside consumer: a cap", perSecond: 68, remaining: 2, u: 30 * ms, want: 67 - 2},
		{name: "a gap beside an outside consumer: a cap", perSecond: 40, remaining: 2, gap: 400 * ms, want: 39},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vw := bursty(tc.perSecond, tc.gap, tc.u)
			sig := header.Signal{Quotas: []header.Quota{xrl(100, tc.remaining, time.Second)}}
			spec, _, ok := vw.decide(&b, now, true, sig, now)
			switch {
			case tc.want < 0:
				if ok {
					t.Fatalf("decide = %+v, want nothing", spec)
				}
			case !ok:
				t.Fatal("decide said nothing")
			case math.Abs(spec.Rate-tc.want) > 1.5:
				t.Errorf("rate = %.2f, want %.2f", spec.Rate, tc.want)
			}
		})
	}
}

// TestLedgerSlack: the window's start between two samples may lie
// anywhere from the count before it, and the newest sample's count lacks
// what was sent during its call.
func TestLedgerSlack(t *testing.T) {
	ms := int64(time.Millisecond)
	var l ledger
	for i := int64(0); i <= 60; i++ {
		if i > 10 && i < 20 {
			continue // a gap from 1.4 s to 1.8 s
		}
		l.add(1000*ms+i*40*ms, 50+4*i, 10*ms, 0)
	}
	own, covered, _ := l.window(1000*ms, 2600*ms)
	// The start, 1.6 s, lies halfway across the gap: 20 units above the
	// sample before it.
	if s := l.slack(1000*ms, 2600*ms, own, covered, 0); math.Abs(s-20) > 1e-9 {
		t.Errorf("slack across a gap = %v, want 20", s)
	}
	if s := l.slack(1000*ms, 3400*ms, own, covered, 0); s != 0 {
		t.Errorf("slack at a sample = %v, want 0", s)
	}
	l.add(3440*ms, 50+4*61, 10*ms, 50*ms)
	// Its count is of as early as 50 ms before: the 95 units it counts
	// were sent over 950 ms, at 100/s.
	if s := l.slack(1000*ms, 3440*ms, 95, 1000*ms, 0); math.Abs(s-5) > 1e-9 {
		t.Errorf("slack of a 50 ms call at 100/s = %v, want 5", s)
	}
	if s := l.slack(1000*ms, 3440*ms, 95, 40*ms, 0); !math.IsInf(s, 1) {
		t.Errorf("slack of a call longer than the count = %v, want +Inf", s)
	}
	// 40 ms past the newest sample (and the window's start at a
	// sample), after a second in which the fleet sent 95 units: window
	// carries the count on at 95/s, while a fleet on a rule of 200/s may
	// have sent at up to 200/s.
	if s := l.slack(1000*ms, 3480*ms, 95, 1000*ms, 200); math.Abs(s-(5+4.2)) > 1e-9 {
		t.Errorf("slack 40 ms past the newest sample = %v, want 5 for the call and 4.2 for the carry", s)
	}
	if s := l.slack(1000*ms, 3480*ms, 95, 1000*ms, 50); math.Abs(s-5) > 1e-9 {
		t.Errorf("slack past the newest sample of a fleet sending above its rule = %v, want 5", s)
	}
}

// TestReportDelayIgnoresPauses: units that left before a pause and are
// reported after it waited for the pause, not for the reporting, and
// leave the report delay as it was; units sent after the pause count
// again.
func TestReportDelayIgnoresPauses(t *testing.T) {
	v := NewViews()
	bs := []store.Bucket{quotaBucket()}
	now := int64(time.Hour)
	step := int64(10 * time.Millisecond)
	for range 200 {
		v.Departed(bs, now)
		now += step
		v.Take(bs, now)
		bs[0].Sent = 0
	}
	vw := v.lookup(bs[0].Key)
	steady := vw.delayNs()
	if math.Abs(steady-float64(step)/2) > float64(time.Millisecond) {
		t.Fatalf("steady delay = %v, want about %v", time.Duration(steady), time.Duration(step/2))
	}
	v.Departed(bs, now)
	v.Paused(bs, now+int64(3*time.Second), now)
	now += int64(3*time.Second) + step
	v.Take(bs, now)
	if bs[0].Sent != 1 {
		t.Fatalf("Take after the pause moved %d units, want 1", bs[0].Sent)
	}
	bs[0].Sent = 0
	if got := vw.delayNs(); got != steady {
		t.Errorf("delay after the pause = %v, want %v as before it", time.Duration(got), time.Duration(steady))
	}
	v.Departed(bs, now)
	now += 4 * step
	v.Take(bs, now)
	if got := vw.delayNs(); got <= steady {
		t.Errorf("delay after a report of a unit sent after the pause = %v, want it to move towards %v from %v", time.Duration(got), time.Duration(2*step), time.Duration(steady))
	}
}
