package throttle

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

func TestLiftGate(t *testing.T) {
	g := newLiftGate()
	a := []bucket{{key: "a"}}
	b := []bucket{{key: "b"}}
	up := feedback{lift: lift{share: 0.05, cooldown: time.Second, backdate: slowCooldown}}
	hard := feedback{slow: cut{factor: slowOnLimited, cooldown: slowCooldown, fromFree: true}}
	now := epoch

	if f := g.filter(a, up, now); !f.empty() {
		t.Fatal("a lift passed for a bucket this process never cut")
	}
	if f := g.filter(a, hard, now); f != hard {
		t.Fatalf("a cut was changed: %+v", f)
	}
	if f := g.filter(a, up, now.Add(100*time.Millisecond)); !f.empty() {
		t.Fatal("a lift passed within the cut's cooldown")
	}
	if f := g.filter(a, up, now.Add(slowCooldown)); f != up {
		t.Fatalf("a lift after the cut's cooldown was dropped: %+v", f)
	}
	if f := g.filter(a, up, now.Add(slowCooldown+400*time.Millisecond)); !f.empty() {
		t.Fatal("a second lift passed within half the lift's cooldown")
	}
	if f := g.filter(append(a, b...), up, now.Add(slowCooldown+500*time.Millisecond)); f != up {
		t.Fatal("a lift of a request with a cut bucket among others was dropped")
	}
	if f := g.filter(b, up, now.Add(2*time.Second)); !f.empty() {
		t.Fatal("a lift passed for the request's other bucket")
	}
	brake := feedback{slow: cut{factor: 0.95, cooldown: time.Second, backdate: slowCooldown}}
	g.filter(a, hard, now.Add(3*time.Second))
	if f := g.filter(a, brake, now.Add(4*time.Second)); f != brake {
		t.Fatalf("a brake was changed: %+v", f)
	}
	if f := g.filter(a, up, now.Add(5*time.Second)); !f.empty() {
		t.Fatal("a lift passed after a brake: the hard cut's excess is won back by then")
	}
	g.filter(a, hard, now.Add(5*time.Second))
	if f := g.filter(a, up, now.Add(maxRecovery+6*time.Second)); !f.empty() {
		t.Fatal("a lift passed after the longest recovery")
	}
	g.filter(b, hard, now.Add(maxRecovery+6*time.Second))
	if _, ok := g.buckets["a"]; ok {
		t.Fatal("a bucket recovered long ago is still tracked")
	}
}

// TestTransportLiftsAfterCut: a process that cut a bucket on a 429 raises
// it again when the server reports plenty remaining a window later, and
// only then.
func TestTransportLiftsAfterCut(t *testing.T) {
	clk := fakeclock.New(epoch)
	tr := mustNew(t, nil, WithClock(clk), WithHeadroom(0), WithRules(Rule{Name: "r", Limit: Limit{Rate: 100, Period: time.Second, Burst: 1}}))
	bs := []bucket{{key: "r", rule: "r", interval: 10 * time.Millisecond, burst: 1, cost: 1}}
	ls := tr.store.(*localStore)
	rate := func() float64 {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return 1e9 / float64(ls.intervalLocked(bs[0], clk.Now().UnixNano()))
	}
	plenty := &http.Response{StatusCode: http.StatusOK, Header: http.Header{
		"Ratelimit-Policy": {`"q";q=100;w=1`}, "Ratelimit": {`"q";r=40;t=1`},
	}}
	tr.listen(t.Context(), bs, plenty)
	if got := rate(); got != 100 {
		t.Fatalf("a bucket at its rule moved to %.1f/s", got)
	}
	tr.listen(t.Context(), bs, &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}})
	cut := rate()
	if cut > 71 {
		t.Fatalf("rate after a 429 = %.1f/s", cut)
	}
	clk.Advance(500 * time.Millisecond)
	tr.listen(t.Context(), bs, plenty)
	if got := rate(); got > cut+1.1 {
		t.Fatalf("lifted within the window after the cut: %.1f/s → %.1f/s", cut, got)
	}
	clk.Advance(750 * time.Millisecond)
	before := rate()
	tr.listen(t.Context(), bs, plenty)
	if got := rate(); got < before+9.9 {
		t.Fatalf("rate after a lift = %.1f/s, want %.1f + 10", got, before)
	}
}
