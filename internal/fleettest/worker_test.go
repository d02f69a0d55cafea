package fleettest_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fleettest"
)

// TestLocalFleet runs two worker processes without Redis: each has its own
// bucket, so each alone keeps the rule and together they send twice it.
// It checks the harness end to end: processes, start signal, summaries.
func TestLocalFleet(t *testing.T) {
	const (
		rate     = 20
		burst    = 2
		duration = 1500 * time.Millisecond
	)
	srv := fleettest.NewServer(t)
	cfg := fleettest.WorkerConfig{
		URL:        srv.URL + "/local",
		Rules:      []fleettest.RuleConfig{{Name: "api", Rate: rate, Period: time.Second, Burst: burst}},
		Headroom:   fleettest.Headroom(0),
		Goroutines: 3,
		Duration:   duration,
	}
	res := fleettest.Run(t, cfg, cfg)
	arrivals := srv.Arrivals()
	start := srv.Offset(res.Start)
	for id, s := range res.Summaries {
		mine := arrivals.FromWorker(id)
		t.Logf("worker %d: %d arrivals, summary %+v", id, len(mine), s)
		if s.ID != id || s.Sent != len(mine) || s.Statuses[http.StatusOK] != len(mine) {
			t.Errorf("worker %d: summary (id %d, sent %d, 200s %d) disagrees with the server's %d arrivals", id, s.ID, s.Sent, s.Statuses[http.StatusOK], len(mine))
		}
		// A GCRA bucket admits at most burst + rate·t in any span t.
		if hi := burst + int(rate*duration.Seconds()); len(mine) > hi {
			t.Errorf("worker %d sent %d, above its own bucket's %d", id, len(mine), hi)
		}
		if len(mine) < rate/2 {
			t.Errorf("worker %d sent only %d in %v", id, len(mine), duration)
		}
		if first, _, ok := fleettest.Span(mine.Times()); ok && first < start {
			t.Errorf("worker %d sent at %v, before the common start %v", id, first, start)
		}
		if n := unexpectedErrors(s); n > 0 {
			t.Errorf("worker %d: unexpected errors %v %q", id, s.Errors, s.Samples)
		}
	}
}

// unexpectedErrors counts the errors other than those every run ends with:
// requests whose slot lies beyond the run's end, or whose wait the end cut
// short.
func unexpectedErrors(s fleettest.Summary) int {
	return s.ErrorCount() - s.Errors[fleettest.ErrKindBeyondDeadline] - s.Errors[fleettest.ErrKindContext]
}

// TestPacedWorker checks Interval pacing: one goroutine, one request per
// 200 ms, for 1 s, sends 5 requests.
func TestPacedWorker(t *testing.T) {
	srv := fleettest.NewServer(t)
	res := fleettest.Run(t, fleettest.WorkerConfig{
		URL:        srv.URL,
		Rules:      []fleettest.RuleConfig{{Name: "api", Rate: 100, Period: time.Second, Burst: 5}},
		Goroutines: 1,
		Interval:   200 * time.Millisecond,
		Duration:   time.Second,
	})
	// Ticks at 0, 200, …, 800 ms; a tick late under load is skipped, never
	// doubled, so there are at most 5.
	if n := res.Summaries[0].Sent; n > 5 || n < 3 {
		t.Errorf("paced worker sent %d, want 5 (at least 3 on a loaded machine)", n)
	}
}

// TestWorkerRequestsLimit checks that Requests stops a worker early.
func TestWorkerRequestsLimit(t *testing.T) {
	srv := fleettest.NewServer(t)
	res := fleettest.Run(t, fleettest.WorkerConfig{
		URL:        srv.URL,
		Goroutines: 4,
		Requests:   7,
		Duration:   5 * time.Second,
	})
	if s := res.Summaries[0]; s.Attempts != 7 || srv.Count() != 7 {
		t.Errorf("worker made %d attempts, server saw %d; want 7", s.Attempts, srv.Count())
	}
}

// TestWorkerRefusesUnappliedKnob checks that a knob nobody applies fails the
// worker instead of being ignored.
func TestWorkerRefusesUnappliedKnob(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  string
		want string
	}{
		{"fallback", `{"url":"http://x","goroutines":1,"duration":1000000000,"fallback":"open"}`, "Fallback"},
		{"redis timeout", `{"url":"http://x","goroutines":1,"duration":1000000000,"redis_timeout":5}`, "RedisTimeout"},
		{"extra", `{"url":"http://x","goroutines":1,"duration":1000000000,"extra":{"k":"v"}}`, "Extra"},
		{"invalid", `{"url":"","goroutines":1,"duration":1}`, "URL is empty"},
		{"unknown dialect", `{"url":"http://x","goroutines":1,"duration":1000000000,"dialects":["github","nope"]}`, `unknown dialect "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fleettest.RunWorker(tc.cfg, nil, strings.NewReader(""), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RunWorker error = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestRunWorkerInProcess drives the worker protocol through pipes, and
// checks that an OptionsFunc sees the knobs and its options apply.
func TestRunWorkerInProcess(t *testing.T) {
	srv := fleettest.NewServer(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cfg := `{"url":"` + srv.URL + `","goroutines":2,"duration":300000000,"requests":3,"fallback":"open",` +
		`"rules":[{"name":"api","rate":10,"period":1000000000,"burst":1}]}`
	seen := make(chan string, 1)
	extra := func(c fleettest.WorkerConfig) ([]throttle.Option, error) {
		seen <- c.Fallback
		return []throttle.Option{throttle.WithMaxWait(time.Hour)}, nil
	}
	done := make(chan error, 1)
	go func() {
		err := fleettest.RunWorker(cfg, extra, inR, outW)
		_ = outW.Close()
		done <- err
	}()
	lines := bufio.NewScanner(outR)
	if !lines.Scan() || lines.Text() != "FLEETTEST READY" {
		t.Fatalf("first line %q, want the ready line", lines.Text())
	}
	start := time.Now().Add(10 * time.Millisecond).Format(time.RFC3339Nano)
	if _, err := io.WriteString(inW, `{"start":"`+start+`"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "FLEETTEST SUMMARY ") {
		t.Fatalf("second line %q, want the summary", lines.Text())
	}
	if err := <-done; err != nil {
		t.Fatalf("RunWorker: %v", err)
	}
	if got := <-seen; got != "open" {
		t.Errorf("OptionsFunc saw Fallback %q, want open", got)
	}
	if srv.Count() != 3 {
		t.Errorf("server saw %d requests, want 3", srv.Count())
	}
}

// TestFleetKill checks that a worker killed mid-run (as issue 5's dead
// replica) is reported as such while the others finish normally.
func TestFleetKill(t *testing.T) {
	srv := fleettest.NewServer(t)
	cfg := fleettest.WorkerConfig{URL: srv.URL, Goroutines: 1, Interval: 50 * time.Millisecond, Duration: 1500 * time.Millisecond}
	f := fleettest.Start(t, cfg, cfg)
	start := f.Go()
	time.Sleep(time.Until(start.Add(500 * time.Millisecond)))
	f.Kill(1)
	killedAt := srv.Offset(time.Now())
	sums := f.Wait()
	if !sums[1].Killed || sums[0].Killed {
		t.Fatalf("Killed flags: worker 0 %v, worker 1 %v; want false, true", sums[0].Killed, sums[1].Killed)
	}
	if sums[0].Sent == 0 {
		t.Error("the surviving worker sent nothing")
	}
	// A request in flight at the kill may still land just after it.
	if at, ok := fleettest.FirstIn(srv.Arrivals().FromWorker(1).Times(), killedAt+100*time.Millisecond, time.Hour); ok {
		t.Errorf("killed worker's request arrived at %v, after the kill at %v", at, killedAt)
	}
}
