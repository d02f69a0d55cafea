package feedback

import (
	"math"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/store"
)

// TestEstimates: a reading is set beside what the fleet's own count leaves
// of the quota, the least remaining of the readable quotas, and only for a
// bucket the store counts.
func TestEstimates(t *testing.T) {
	sec := int64(time.Second)
	now := 10 * sec
	b := quotaBucket()
	views := NewViews()
	vw := &quotaView{}
	views.views[b.Key] = vw
	fill(vw, &b, 1000, now-2*sec, now, 68) // the fleet sends 68/s
	bs := []store.Bucket{b}
	counted := Booking{Depart: now, Counts: []int64{1136}}
	// Another consumer spends 30/s: the server reports 2 left of 100.
	sig := header.Signal{Quotas: []header.Quota{
		xrl(1000, 500, time.Hour),
		xrl(100, 2, time.Second),
		{Name: "tokens", Unit: "tokens", Limit: 10, Remaining: 0, HasLimit: true, HasRemaining: true},
	}}
	es := views.Estimates(bs, counted, sig, now)
	if len(es) != 1 {
		t.Fatalf("estimates %+v, want one", es)
	}
	e := es[0]
	if e.Bucket != 0 || e.Limit != 100 || e.Remaining != 2 || e.Window != time.Second {
		t.Errorf("estimate %+v, want the 100/s quota's reading over its second", e)
	}
	if math.Abs(e.Left-32) > 1 {
		t.Errorf("left %.1f, want about 100-68 = 32 (30 more than the server's 2: the other consumer)", e.Left)
	}

	fresh := &quotaView{}
	views.views["fresh"] = fresh
	fb := b
	fb.Key = "fresh"
	fill(fresh, &fb, 1, now-sec/2, now, 68)
	if es := views.Estimates([]store.Bucket{fb}, counted, sig, now); es != nil {
		t.Errorf("a count covering half the window: %+v, want none", es)
	}
	if es := views.Estimates(bs, Booking{Depart: now}, sig, now); es != nil {
		t.Errorf("uncounted bucket: %+v, want none", es)
	}
	if es := views.Estimates(bs, counted, header.Signal{Quotas: sig.Quotas[2:]}, now); es != nil {
		t.Errorf("token quota only: %+v, want none", es)
	}
	if es := views.Estimates([]store.Bucket{{Key: "other", Interval: b.Interval, Period: b.Period, Rate: 100}}, counted, sig, now); es != nil {
		t.Errorf("bucket without a view: %+v, want none", es)
	}
}
