package throttle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/providers"
)

// recorder is an Observer keeping every event.
type recorder struct {
	mu sync.Mutex
	es []throttle.Event
}

func (r *recorder) Observe(e throttle.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.es = append(r.es, e)
}

// events returns the events so far, and forgets them.
func (r *recorder) take() []throttle.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := r.es
	r.es = nil
	return es
}

// of returns the events of kind k in es.
func of(es []throttle.Event, k throttle.EventKind) []throttle.Event {
	var out []throttle.Event
	for _, e := range es {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// one returns the one event of kind k in es, or fails.
func one(t *testing.T, es []throttle.Event, k throttle.EventKind) throttle.Event {
	t.Helper()
	got := of(es, k)
	if len(got) != 1 {
		t.Fatalf("%d %v events, want 1; events: %+v", len(got), k, es)
	}
	return got[0]
}

// checkRequest checks the request fields of e.
func checkRequest(t *testing.T, e throttle.Event, method, host, rule string) {
	t.Helper()
	if e.Method != method || e.Host != host || e.Rule != rule {
		t.Errorf("%v: method %q host %q rule %q, want %q %q %q", e.Kind, e.Method, e.Host, e.Rule, method, host, rule)
	}
}

func TestObserverWait(t *testing.T) {
	rec := &recorder{}
	tr, clk := fillBucket(t, okBase, throttle.WithObserver(rec))
	first := one(t, rec.take(), throttle.EventAcquired)
	checkRequest(t, first, "GET", "x", "one")
	if first.Wait != 0 {
		t.Errorf("first request waited %v, want 0", first.Wait)
	}
	done := make(chan error, 1)
	go func() {
		done <- roundTrip(tr, newReq(t, context.Background(), "POST", "http://api.example:8443/v1/charges?key=sk_live"))
	}()
	clk.WaitTimers(1)
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	es := rec.take()
	q, dq, acq := one(t, es, throttle.EventQueued), one(t, es, throttle.EventDequeued), one(t, es, throttle.EventAcquired)
	for _, e := range []throttle.Event{q, dq, acq} {
		checkRequest(t, e, "POST", "api.example:8443", "one")
	}
	if q.Wait != time.Second || acq.Wait != time.Second {
		t.Errorf("queued for %v, acquired after %v; want 1s and 1s", q.Wait, acq.Wait)
	}
	if len(es) != 3 || es[0].Kind != throttle.EventQueued || es[2].Kind != throttle.EventAcquired {
		t.Errorf("events %v, want queued, dequeued, acquired", es)
	}
	if !acq.At.Equal(clk.Now()) {
		t.Errorf("acquired at %v, want the clock's %v", acq.At, clk.Now())
	}
}

func TestObserverRejected(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	costly := throttle.Rule{Name: "cost", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 2},
		Cost: func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("Cost")); return n }}
	for _, tc := range []struct {
		name   string
		opts   []throttle.Option
		ctx    context.Context
		want   throttle.RejectReason
		rule   string
		wait   time.Duration
		costly bool
	}{
		{"beyond max wait", []throttle.Option{throttle.WithoutWaiting()}, context.Background(), throttle.RejectBeyondMaxWait, "one", time.Second, false},
		{"queue full", []throttle.Option{throttle.WithMaxQueue(0)}, context.Background(), throttle.RejectQueueFull, "one", 0, false},
		{"rule", []throttle.Option{throttle.WithRules(costly)}, context.Background(), throttle.RejectRule, "cost", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			tr, _ := fillBucket(t, okBase, append(tc.opts, throttle.WithObserver(rec))...)
			rec.take()
			req := newReq(t, tc.ctx, "GET", "http://x/")
			if tc.costly {
				req = newReq(t, tc.ctx, "GET", "http://x/", "Cost", "3")
			}
			err := roundTrip(tr, req)
			if err == nil {
				t.Fatal("no error")
			}
			e := one(t, rec.take(), throttle.EventRejected)
			checkRequest(t, e, "GET", "x", tc.rule)
			if e.Reason != tc.want || e.Wait != tc.wait || !errors.Is(e.Err, err) {
				t.Errorf("reason %v wait %v err %v; want %v, %v, %v", e.Reason, e.Wait, e.Err, tc.want, tc.wait, err)
			}
		})
	}
	t.Run("beyond deadline", func(t *testing.T) {
		rec := &recorder{}
		tr, _ := fillBucket(t, okBase, throttle.WithObserver(rec))
		rec.take()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = roundTrip(tr, newReq(t, ctx, "GET", "http://x/"))
		if e := one(t, rec.take(), throttle.EventRejected); e.Reason != throttle.RejectBeyondDeadline || e.Rule != "one" {
			t.Errorf("reason %v rule %q, want beyond_deadline, one", e.Reason, e.Rule)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		rec := &recorder{}
		tr, _ := fillBucket(t, okBase, throttle.WithObserver(rec))
		rec.take()
		_ = roundTrip(tr, newReq(t, cancelled, "GET", "http://x/"))
		if e := one(t, rec.take(), throttle.EventRejected); e.Reason != throttle.RejectCanceled || e.Rule != "one" {
			t.Errorf("reason %v rule %q, want canceled, one", e.Reason, e.Rule)
		}
	})
	t.Run("canceled while queued", func(t *testing.T) {
		rec := &recorder{}
		tr, clk := fillBucket(t, okBase, throttle.WithObserver(rec))
		rec.take()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- roundTrip(tr, newReq(t, ctx, "GET", "http://x/")) }()
		clk.WaitTimers(1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		es := rec.take()
		one(t, es, throttle.EventQueued)
		one(t, es, throttle.EventDequeued)
		if e := one(t, es, throttle.EventRejected); e.Reason != throttle.RejectCanceled {
			t.Errorf("reason %v, want canceled", e.Reason)
		}
	})
}

// limitedOnce answers its first request with a 429 and headers h, every
// other with a 200.
func limitedOnce(h http.Header) rtFunc {
	var mu sync.Mutex
	n := 0
	return func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h.Clone(), Body: http.NoBody, Request: r}, nil
		}
		return okBase(r)
	}
}

func TestObserverRateLimitedPauseRetry(t *testing.T) {
	rec := &recorder{}
	clk := fakeclock.New(epoch)
	tr := mustNew(t, limitedOnce(http.Header{"Retry-After": {"2"}}), throttle.WithClock(clk), throttle.WithObserver(rec),
		throttle.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}}))
	done := make(chan error, 1)
	go func() {
		done <- roundTrip(tr, newReq(t, context.Background(), "GET", "http://api.example/v1?token=secret"))
	}()
	clk.WaitTimers(1) // the retry's delay
	clk.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	es := rec.take()
	rl := one(t, es, throttle.EventRateLimited)
	checkRequest(t, rl, "GET", "api.example", "api")
	if rl.Status != http.StatusTooManyRequests || !rl.HasWait || rl.Wait != 2*time.Second || !rl.At.Equal(epoch) || rl.Dialect != "" {
		t.Errorf("rate limited %+v; want status 429, a named wait of 2s, at the epoch, no dialect", rl)
	}
	p := one(t, es, throttle.EventPaused)
	checkRequest(t, p, "GET", "api.example", "api")
	if p.Wait != 2*time.Second {
		t.Errorf("paused for %v, want 2s", p.Wait)
	}
	r := one(t, es, throttle.EventRetry)
	checkRequest(t, r, "GET", "api.example", "api")
	if r.Attempt != 2 || r.Wait != 2*time.Second {
		t.Errorf("retry attempt %d after %v, want 2 after 2s", r.Attempt, r.Wait)
	}
	if acq := of(es, throttle.EventAcquired); len(acq) != 2 {
		t.Errorf("%d acquired events, want 2 (the request and its retry)", len(acq))
	}
	// The 429 also starts the model's count (an EventCapped of rate 0),
	// between the pause and the retry.
	var kinds []throttle.EventKind
	for _, e := range es {
		if e.Kind != throttle.EventCapped {
			kinds = append(kinds, e.Kind)
		}
	}
	want := []throttle.EventKind{throttle.EventAcquired, throttle.EventRateLimited, throttle.EventPaused, throttle.EventRetry, throttle.EventAcquired}
	if !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

// TestObserverRateLimitedDialect: a rate-limited response that a
// provider's dialect recognised names the dialect, in the event and in
// the log line; the server's own words stay in ServerReason.
func TestObserverRateLimitedDialect(t *testing.T) {
	rec := &recorder{}
	logs := &syncBuffer{}
	clk := fakeclock.New(epoch)
	h := http.Header{"Stripe-Rate-Limited-Reason": {"global-rate"}, "Retry-After": {"1"}}
	tr := mustNew(t, limitedOnce(h), throttle.WithClock(clk), throttle.WithObserver(rec),
		throttle.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		throttle.WithDialects(providers.Stripe), throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: 1}),
		throttle.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}}))
	if err := roundTrip(tr, newReq(t, context.Background(), "POST", "http://api.stripe.com/v1/charges")); err != nil {
		t.Fatal(err)
	}
	rl := one(t, rec.take(), throttle.EventRateLimited)
	checkRequest(t, rl, "POST", "api.stripe.com", "api")
	if rl.Dialect != "stripe" || rl.ServerReason != "global-rate" || rl.Status != http.StatusTooManyRequests {
		t.Errorf("rate limited %+v; want dialect stripe, server reason global-rate, status 429", rl)
	}
	lines := logLines(t, logs)
	if len(lines) != 1 || lines[0]["msg"] != "throttle: response rate limited" || lines[0]["dialect"] != "stripe" ||
		lines[0]["server_reason"] != "global-rate" {
		t.Errorf("log lines %v; want the rate-limited one with dialect stripe and server_reason global-rate", lines)
	}
}

func TestObserverCapped(t *testing.T) {
	rec := &recorder{}
	clk := fakeclock.New(epoch)
	// A server whose quota someone else spends too: 100 per minute, of
	// which 60 are gone before the fleet's first request.
	var mu sync.Mutex
	sent := 0
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		sent++
		left := max(40-sent, 0)
		mu.Unlock()
		h := http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {strconv.Itoa(left)}}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}, nil
	})
	tr := mustNew(t, base, throttle.WithClock(clk), throttle.WithObserver(rec), throttle.WithoutWaiting(),
		throttle.WithRules(throttle.Rule{Name: "quota", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 10}}))
	for range 30 {
		// Once capped, requests may find no slot: they fail, not wait.
		_ = roundTrip(tr, newReq(t, context.Background(), "GET", "http://api.example/"))
		clk.Advance(time.Second)
	}
	cs := of(rec.take(), throttle.EventCapped)
	if len(cs) < 2 {
		t.Fatalf("capped events %+v; want a first that starts the count and a cap", cs)
	}
	if c := cs[0]; c.CapRate != 0 || !c.HasRemaining || c.Remaining != 39 {
		t.Errorf("first capped event %+v; want the count started (rate 0) at remaining 39", c)
	}
	c := cs[len(cs)-1]
	checkRequest(t, c, "GET", "api.example", "quota")
	if c.CapRate <= 0 || c.CapRate >= 100.0/60 || !c.HasRemaining || c.Remaining >= 39 {
		t.Errorf("last capped event %+v; want a cap below the rule's 1.67/s and the server's remaining", c)
	}
}

// TestObserverQuota: every reading of a counted quota comes beside the
// fleet's own count of it, so that an operator sees what others spend.
func TestObserverQuota(t *testing.T) {
	rec := &recorder{}
	clk := fakeclock.New(epoch)
	// A server of 100 in any second, 25 of which someone else spends from
	// 1.5 s on (before, the model's first window would read it as a
	// pace: see docs/FEEDBACK.md): it reports 100 less what the fleet
	// sent in the last second, less the others'.
	const limit, others = 100, 25
	othersFrom := epoch.Add(1500 * time.Millisecond)
	var mu sync.Mutex
	var arrivals []time.Time
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		now := clk.Now()
		arrivals = append(arrivals, now)
		n := 0
		for _, a := range arrivals {
			if a.After(now.Add(-time.Second)) {
				n++
			}
		}
		mu.Unlock()
		if !now.Before(othersFrom) {
			n += others
		}
		h := http.Header{"X-Ratelimit-Limit": {strconv.Itoa(limit)}, "X-Ratelimit-Remaining": {strconv.Itoa(max(limit-n, 0))}}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}, nil
	})
	tr := mustNew(t, base, throttle.WithClock(clk), throttle.WithObserver(rec), throttle.WithoutWaiting(),
		throttle.WithRules(throttle.Rule{Name: "quota", Limit: throttle.Limit{Rate: limit, Period: time.Second, Burst: 1}}))
	// 25 a second for 3 s: below the room the server leaves (75), so that
	// no request waits.
	for range 75 {
		if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://api.example/")); err != nil {
			t.Fatal(err)
		}
		clk.Advance(40 * time.Millisecond)
	}
	qs := of(rec.take(), throttle.EventQuota)
	// None in the count's first second: it covers only part of the window.
	if len(qs) < 45 || len(qs) > 51 {
		t.Fatalf("%d quota events, want those after the first second (the count covers a whole window then): %+v", len(qs), qs)
	}
	for _, e := range qs {
		checkRequest(t, e, "GET", "api.example", "quota")
		if e.Limit != limit || !e.HasRemaining || e.Window != time.Second {
			t.Errorf("quota event %+v, want the server's limit 100 over 1s", e)
		}
		// The fleet sent 25 in the last second (one or two more or less:
		// its reports go with the next booking).
		if e.Estimate < limit-27 || e.Estimate > limit-23 {
			t.Errorf("estimate %.1f, want about %d (the limit less the fleet's 25)", e.Estimate, limit-25)
		}
		want := 0.0
		if !e.At.Before(othersFrom) {
			want = others
		}
		if gap := e.Estimate - float64(e.Remaining); math.Abs(gap-want) > 2 {
			t.Errorf("at %v estimate %.1f against the server's %d: a gap of %.1f, want about the others' %.0f", e.At.Sub(epoch), e.Estimate, e.Remaining, gap, want)
		}
	}
}

func TestObserverLeases(t *testing.T) {
	rec := &recorder{}
	clk := fakeclock.New(epoch)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	tr := mustNew(t, base, throttle.WithClock(clk), throttle.WithObserver(rec),
		throttle.WithRules(throttle.Rule{Name: "inflight", Concurrency: 2}))
	resp, err := tr.RoundTrip(newReq(t, context.Background(), "GET", "http://api.example/"))
	if err != nil {
		t.Fatal(err)
	}
	a := one(t, rec.take(), throttle.EventLeaseAcquired)
	checkRequest(t, a, "GET", "api.example", "inflight")
	clk.Advance(3 * time.Second)
	_ = resp.Body.Close()
	r := one(t, rec.take(), throttle.EventLeaseReleased)
	checkRequest(t, r, "GET", "api.example", "inflight")
	if r.Wait != 3*time.Second {
		t.Errorf("held for %v, want 3s", r.Wait)
	}
	_ = resp.Body.Close()
	if es := rec.take(); len(es) != 0 {
		t.Errorf("a second Close sent %v", es)
	}
}
