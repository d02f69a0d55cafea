package feedbacktest

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestFleetPausesOn429: four processes share one 100/s bucket in Redis;
// the server answers its 150th request with 429 and Retry-After: 2. From
// the moment that answer leaves the server, no process sends for 2 s, and
// every process sends again afterwards.
//
// Tolerance. The pause lands in Redis a few milliseconds after the 429 is
// answered (the response's trip back, then pause.lua), and it stops new
// bookings only: a request that had already left, or had already booked its
// slot and sleeps until it, still goes. Each goroutine has at most one
// request outstanding, so at most one arrival per goroutine may fall in the
// pause, and only in its first moments: the latest such request is one
// booked just before the pause landed, at most a queue's depth of slots
// ahead (one slot per goroutine of the fleet, 10 ms each at 100/s), plus
// stall time. The test therefore allows at most one arrival per goroutine
// in the pause, all within committedHorizon of the 429, and none after.
// The fleet is paced below the bucket's rate (3 goroutines per process,
// one request each 160 ms: 75/s in all) so that its queue is short and the
// tolerance is about requests in flight; TestFleetPausesOn429Saturated
// covers a fleet with a full queue.
func TestFleetPausesOn429(t *testing.T) {
	runPause(t, 3, 160*time.Millisecond)
}

// TestFleetPausesOn429Saturated is TestFleetPausesOn429 with a fleet that
// wants twice the bucket's rate (4 processes of 8 unpaced goroutines), so
// that up to 32 requests are booked ahead when the 429 comes: those of the
// process that received the 429 book again after the pause (waitQueue.hold
// in the throttle package); those of the other processes, already booked,
// still go (up to 320 ms after the pause landed), and no other. The split
// is logged.
func TestFleetPausesOn429Saturated(t *testing.T) {
	runPause(t, 8, 0)
}

const (
	pauseWorkers  = 4
	pauseRate     = 100
	pauseBurst    = 5
	pauseNth      = 150
	pauseDuration = 6 * time.Second
	pauseFor      = 2 * time.Second
)

func runPause(t *testing.T, goroutines int, interval time.Duration) {
	rs := redistest.Start(t)
	srv := fleettest.NewServer(t, fleettest.RespondNth(pauseNth, fleettest.Response{
		Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"2"}},
	}))
	cfg := fleettest.WorkerConfig{
		URL:              srv.URL + "/api",
		RedisAddrs:       []string{rs.Addr()},
		Namespace:        namespace(t),
		Rules:            []fleettest.RuleConfig{{Name: "api", Rate: pauseRate, Period: time.Second, Burst: pauseBurst}},
		Goroutines:       goroutines,
		Interval:         interval,
		Duration:         pauseDuration,
		RecordDepartures: true,
	}
	cfgs := make([]fleettest.WorkerConfig, pauseWorkers)
	for i := range cfgs {
		cfgs[i] = cfg
	}
	stalls := fleettest.WatchStalls(t)
	res := fleettest.Run(t, cfgs...)
	parentStalls := stalls()

	all := srv.Arrivals()
	start := srv.Offset(res.Start)
	var at429 time.Duration
	found, receiver := false, 0
	for _, a := range all {
		if a.Seq == pauseNth {
			at429, found, receiver = a.At, true, a.Worker
		}
	}
	if !found {
		t.Fatalf("the server saw %d requests, fewer than %d: no 429 was sent", len(all), pauseNth)
	}
	pauseEnd := at429 + pauseFor
	// The pause is checked up to clockSlack before its end. It runs from
	// when pause.lua read Redis's clock, a few milliseconds after the 429,
	// but a waiter departs up to half a Redis round trip early by design
	// (Transport.acquire counts the wait from when the store decided),
	// and Redis's wall clock and this process's monotonic clock drift
	// apart by milliseconds under load: an arrival a few milliseconds
	// before the end is the end.
	const clockSlack = 25 * time.Millisecond
	checkEnd := pauseEnd - clockSlack
	fleet := all.Fleet()
	times := fleet.Times()
	t.Logf("429 at %v after the start; per second from the start %v",
		(at429 - start).Round(time.Millisecond), fleettest.PerSecond(times, start))
	for _, s := range res.Summaries {
		t.Logf("worker %d: attempts %d, sent %d, statuses %v, errors %v, max wait %v",
			s.ID, s.Attempts, s.Sent, s.Statuses, s.Errors, s.MaxWait.Round(time.Millisecond))
	}

	// Arrivals after the 429, during its 2 s.
	var in []fleettest.Arrival
	for _, a := range fleet {
		if a.At > at429 && a.At < checkEnd {
			in = append(in, a)
		}
	}
	goroutinesAll := pauseWorkers * goroutines
	// The latest committed request: booked just before the pause landed,
	// a full queue ahead, plus the stalls measured in the fleet and here.
	stalled := fleettest.StallTime(append(fleettest.Stalls(res.Summaries), parentStalls...), srv.Epoch(),
		fleettest.Window{From: at429, To: checkEnd})
	committedHorizon := time.Duration(goroutinesAll)*(time.Second/pauseRate) + 100*time.Millisecond + stalled
	var late []time.Duration
	for _, a := range in {
		t.Logf("in the pause: worker %d, %v after the 429", a.Worker, (a.At - at429).Round(time.Millisecond))
		if a.At-at429 > committedHorizon {
			late = append(late, a.At-at429)
		}
	}
	t.Logf("%d arrivals in the pause (tolerance: %d, one per goroutine, within %v of the 429; stalls %v)",
		len(in), goroutinesAll, committedHorizon.Round(time.Millisecond), stalled.Round(time.Millisecond))
	fromReceiver := 0
	for _, a := range in {
		if a.Worker == receiver {
			fromReceiver++
		}
	}
	t.Logf("of which %d from worker %d, which received the 429 (its booked waiters book again after the pause), %d from the others (they hold theirs from their next booking on, which tells them of the pause)",
		fromReceiver, receiver, len(in)-fromReceiver)
	if len(in) > goroutinesAll {
		t.Errorf("%d arrivals during the 2 s pause, more than the %d goroutines could have committed before it", len(in), goroutinesAll)
	}
	if len(late) > 0 {
		t.Errorf("%d arrivals in the pause later than any request committed before it could come (%v after the 429): %v",
			len(late), committedHorizon.Round(time.Millisecond), late)
	}

	// Everyone resumes: each worker sends again within a second of the
	// pause's end, and keeps sending.
	for id := range pauseWorkers {
		mine := fleet.FromWorker(id).Times()
		first, ok := fleettest.FirstIn(mine, pauseEnd, pauseEnd+time.Second)
		if !ok {
			t.Errorf("worker %d did not resume within 1 s of the pause's end", id)
			continue
		}
		t.Logf("worker %d resumed %v after the pause's end; %d arrivals after it", id,
			(first - pauseEnd).Round(time.Millisecond), fleettest.CountIn(mine, pauseEnd, start+pauseDuration+time.Second))
	}
	// And at a rate near the bucket's (or the fleet's demand when paced
	// below it): not a trickle.
	want := float64(pauseRate) * 0.5
	if got := fleettest.RateIn(times, pauseEnd+500*time.Millisecond, start+pauseDuration-500*time.Millisecond); got < want {
		t.Errorf("after the pause the fleet sent %.1f/s, want ≥ %.0f/s", got, want)
	}
}
