package feedbacktest

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestFleetRetries: with retries on (the default policy, three attempts),
// GETs answered 429 are retried, each in a fresh slot of the shared bucket,
// so the stream the server sees, retries included, still keeps the rule.
//
// The server answers every 40th request with 429 and no Retry-After (so
// each retry waits the policy's backoff, then books a new slot), and the
// fleet (4 processes of 8 goroutines) wants more than its 100/s bucket. If
// retries jumped the queue, a 1 s window would hold more than the bucket
// admits (100 + burst 5), by the retries. It must not, beyond what the
// measured stalls of the processes explain (see fleettest's
// checkSharedBucket for that allowance).
func TestFleetRetries(t *testing.T) {
	const (
		rate     = 100
		burst    = 5
		every    = 40
		duration = 8 * time.Second
		workers  = 4
	)
	var opts []fleettest.ServerOption
	for k := every; k < 2000; k += every {
		opts = append(opts, fleettest.RespondNth(k, fleettest.Response{Status: http.StatusTooManyRequests}))
	}
	rs := redistest.Start(t)
	srv := fleettest.NewServer(t, opts...)
	cfg := fleettest.WorkerConfig{
		URL:              srv.URL + "/api",
		RedisAddrs:       []string{rs.Addr()},
		Namespace:        namespace(t),
		Rules:            []fleettest.RuleConfig{{Name: "api", Rate: rate, Period: time.Second, Burst: burst}},
		Goroutines:       8,
		Duration:         duration,
		RecordDepartures: true,
	}
	cfgs := make([]fleettest.WorkerConfig, workers)
	for i := range cfgs {
		cfgs[i] = cfg
	}
	stalls := fleettest.WatchStalls(t)
	res := fleettest.Run(t, cfgs...)
	parentStalls := stalls()

	all := srv.Arrivals().Fleet()
	times := all.Times()
	start := srv.Offset(res.Start)
	total := fleettest.Totals(res.Summaries)
	rejectedAtServer := len(all.Status(http.StatusTooManyRequests))
	rejectedToCallers := total.Statuses[http.StatusTooManyRequests]
	retries := total.Sent - total.Responses() - total.Errors[fleettest.ErrKindInFlight]
	for _, s := range res.Summaries {
		t.Logf("worker %d: attempts %d, sent %d, statuses %v, errors %v", s.ID, s.Attempts, s.Sent, s.Statuses, s.Errors)
	}
	t.Logf("per second %v; server answered %d with 429; callers got %d 429s; %d retries sent",
		fleettest.PerSecond(times, start), rejectedAtServer, rejectedToCallers, retries)

	if rejectedAtServer == 0 {
		t.Fatal("the server rejected nothing: the scenario did not run")
	}
	// Every 429 was retried, except those whose retry the run's end cut
	// off (their backoff or slot fell beyond it: one per goroutine at
	// most) and the rare retry that was itself a 40th request.
	if rejectedToCallers > workers*cfg.Goroutines {
		t.Errorf("callers got %d of the server's %d 429s: the fleet did not retry them", rejectedToCallers, rejectedAtServer)
	}
	if retries < rejectedAtServer-workers*cfg.Goroutines {
		t.Errorf("%d retries sent for %d rejections", retries, rejectedAtServer)
	}
	if len(times) != total.Sent {
		t.Errorf("the server saw %d requests, the workers sent %d", len(times), total.Sent)
	}

	// Retries included, the fleet keeps the bucket.
	maxN, win := fleettest.MaxInWindow(times, time.Second)
	stalled := fleettest.StallTime(append(fleettest.Stalls(res.Summaries), parentStalls...), srv.Epoch(), win)
	interval := time.Second / rate
	allowance := int((stalled + interval - 1) / interval)
	t.Logf("max in a 1 s window, retries included: %d (from %v); stalls around it %v, worth %d slots",
		maxN, (win.From - start).Round(time.Millisecond), stalled.Round(time.Millisecond), allowance)
	var later []time.Duration
	for _, x := range times {
		if x >= start+1500*time.Millisecond {
			later = append(later, x)
		}
	}
	laterN, laterWin := fleettest.MaxInWindow(later, time.Second)
	t.Logf("after the first 1.5 s (most retries): max in a 1 s window %d (from %v)", laterN, (laterWin.From - start).Round(time.Millisecond))
	if maxN > rate+burst+allowance {
		t.Errorf("%d arrivals, retries included, in the 1 s window from %v: above the bucket's %d + %d (+ %d for stalls)",
			maxN, (win.From - start).Round(time.Millisecond), rate, burst, allowance)
	}
}
