// Command fleetchart draws, as an SVG chart, the requests per second a
// fleet of workers sends to a rate-limited API over time, against the API's
// quota: first without a throttle, then through one [throttle.Transport]
// per replica whose rule is the quota, the replicas sharing their bucket
// through an embedded Redis (miniredis), which goes down for a while in the
// middle of the run (shaded in the chart): the replicas fall back to local
// buckets at their share of the rule, and return to the shared bucket when
// it is back. The API is an in-process httptest server that answers after a
// fixed latency, so the run needs no network.
//
//	go -C examples run ./fleetchart -o ../docs/fleetchart.svg
//	go -C examples run ./fleetchart -quota 100 -replicas 4 -workers 20 -duration 6s -outage 2s -outage-for 2s -o chart.svg
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/examples/internal/exredis"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.quota, "quota", 100, "the API's quota, requests per second")
	flag.IntVar(&cfg.workers, "workers", 20, "concurrent workers, over all replicas")
	flag.IntVar(&cfg.replicas, "replicas", 4, "replicas (Transports) of the throttled fleet")
	flag.DurationVar(&cfg.duration, "duration", 6*time.Second, "length of each run")
	flag.DurationVar(&cfg.latency, "latency", 20*time.Millisecond, "the API's latency")
	flag.DurationVar(&cfg.outageFrom, "outage", 2*time.Second, "when the embedded Redis goes down, from the start")
	flag.DurationVar(&cfg.outageFor, "outage-for", 2*time.Second, "how long it stays down (0: no outage)")
	out := flag.String("o", "fleetchart.svg", "the SVG file to write")
	flag.Parse()
	// go-redis logs every failed dial of the outage: the chart shows it.
	redis.SetLogger(quiet{})
	if err := run(cfg, *out); err != nil {
		fmt.Fprintln(os.Stderr, "fleetchart:", err)
		os.Exit(1)
	}
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// config is what the flags set.
type config struct {
	quota, workers, replicas int
	duration, latency        time.Duration
	outageFrom, outageFor    time.Duration
}

func run(cfg config, out string) error {
	if cfg.quota <= 0 || cfg.workers <= 0 || cfg.replicas <= 0 || cfg.duration <= 0 {
		return errors.New("quota, workers, replicas and duration must be positive")
	}
	if cfg.outageFrom < 0 || cfg.outageFor < 0 {
		return errors.New("-outage and -outage-for must not be negative")
	}
	without, err := measure(cfg, nil)
	if err != nil {
		return err
	}
	fl, err := newFleet(cfg)
	if err != nil {
		return err
	}
	with, err := measure(cfg, fl)
	if cerr := fl.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := render(f, cfg, without, with); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// fleet is the throttled run's replicas and their embedded Redis.
type fleet struct {
	cfg    config
	store  *exredis.Store
	rdbs   []*redis.Client
	ts     []*throttle.Transport
	ns     string
	outage chan error // the outage's goroutine's end
}

// newFleet starts the embedded Redis; wrap makes the replicas.
func newFleet(cfg config) (*fleet, error) {
	st, err := exredis.Open("")
	if err != nil {
		return nil, err
	}
	return &fleet{cfg: cfg, store: st, ns: fmt.Sprintf("fleetchart-%d", time.Now().UnixNano())}, nil
}

// wrap returns a new replica's Transport over base: the quota as its rule,
// its bucket in the shared Redis.
func (f *fleet) wrap(base http.RoundTripper) http.RoundTripper {
	rdb := f.store.Client()
	t := throttle.NewTransport(base, append(f.store.Options(rdb, f.ns), throttle.WithRules(throttle.Rule{
		Name:  "api",
		Limit: throttle.Limit{Rate: f.cfg.quota, Period: time.Second, Burst: max(f.cfg.quota/10, 1)},
	}))...)
	f.rdbs, f.ts = append(f.rdbs, rdb), append(f.ts, t)
	return t
}

// start takes Redis down at the outage's start and brings it back at its
// end, measured from start (miniredis comes back with its data, as a Redis
// that persists does).
func (f *fleet) start(start time.Time) {
	if f.cfg.outageFor <= 0 {
		return
	}
	mr := f.store.Embedded()
	f.outage = make(chan error, 1)
	go func() {
		time.Sleep(time.Until(start.Add(f.cfg.outageFrom)))
		mr.Close()
		time.Sleep(time.Until(start.Add(f.cfg.outageFrom + f.cfg.outageFor)))
		f.outage <- mr.Restart()
	}()
}

// close waits for the outage to end, closes the replicas, their clients
// and Redis, and returns the error of Redis's restart.
func (f *fleet) close() error {
	var err error
	if f.outage != nil {
		err = <-f.outage
	}
	for _, t := range f.ts {
		_ = t.Close()
	}
	for _, c := range f.rdbs {
		_ = c.Close()
	}
	f.store.Close()
	if err != nil {
		return fmt.Errorf("restart the embedded Redis: %w", err)
	}
	return nil
}

// bin is the width of one sample of the chart.
const bin = 100 * time.Millisecond

// measure runs cfg.workers workers against a fresh API for cfg.duration,
// through the replicas of fl (spread evenly over them; none if fl is nil),
// and returns the requests per second the API received, over the last
// second, at every bin.
func measure(cfg config, fl *fleet) ([]float64, error) {
	var mu sync.Mutex
	var arrivals []time.Time
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		time.Sleep(cfg.latency)
	}))
	defer api.Close()
	base := &http.Transport{MaxIdleConnsPerHost: cfg.workers}
	defer base.CloseIdleConnections()
	clients := []*http.Client{{Transport: base}}
	if fl != nil {
		clients = clients[:0]
		for range cfg.replicas {
			clients = append(clients, &http.Client{Transport: fl.wrap(base)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	start := time.Now()
	if fl != nil {
		fl.start(start)
	}
	var wg sync.WaitGroup
	for w := range cfg.workers {
		client := clients[w%len(clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.URL, nil)
				if err != nil {
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					continue // the run's end, or a wait beyond it
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return perSecond(arrivals, start, cfg.duration), nil
}

// perSecond returns, at the end of every bin of d from start, how many
// arrivals came in the second before it.
func perSecond(arrivals []time.Time, start time.Time, d time.Duration) []float64 {
	n := int(d / bin)
	counts := make([]int, n)
	for _, a := range arrivals {
		if i := int(a.Sub(start) / bin); i >= 0 && i < n {
			counts[i]++
		}
	}
	per := int(time.Second / bin)
	out := make([]float64, n)
	sum := 0
	for i := range counts {
		sum += counts[i]
		if i >= per {
			sum -= counts[i-per]
		}
		out[i] = float64(sum) * float64(per) / float64(min(i+1, per))
	}
	return out
}

// render writes the chart of the two series against the quota line, the
// outage of cfg shaded.
func render(w io.Writer, cfg config, without, with []float64) error {
	const width, height, pad = 800.0, 400.0, 50.0
	quota := float64(cfg.quota)
	top := quota * 1.2
	for _, s := range [][]float64{without, with} {
		for _, v := range s {
			top = max(top, v*1.05)
		}
	}
	n := max(len(without), len(with), 2)
	x := func(i int) float64 { return pad + float64(i)*(width-2*pad)/float64(n-1) }
	y := func(v float64) float64 { return height - pad - v*(height-2*pad)/top }
	line := func(s []float64) string {
		var b strings.Builder
		for i, v := range s {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(i), y(v))
		}
		return b.String()
	}
	secs := float64(n) * bin.Seconds()
	if _, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
`, width, height); err != nil {
		return err
	}
	if cfg.outageFor > 0 {
		// The chart's x runs over bins; bin i ends at (i+1)·bin.
		at := func(d time.Duration) float64 {
			return pad + (d.Seconds()/bin.Seconds()-1)*(width-2*pad)/float64(n-1)
		}
		x0, x1 := max(at(cfg.outageFrom), pad), min(at(cfg.outageFrom+cfg.outageFor), width-pad)
		if _, err := fmt.Fprintf(w, `<rect class="outage" x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#f2f2f2"/>
<text x="%.1f" y="%.0f" text-anchor="middle" fill="#777">Redis down: local buckets at each replica's share</text>
`, x0, pad, max(x1-x0, 0), height-2*pad, (x0+x1)/2, pad+14); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>
<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>
<text x="%.0f" y="%.0f" text-anchor="middle">time (s, 0 to %.1f)</text>
<text x="12" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">requests per second (last second)</text>
<text x="%.0f" y="%.1f" text-anchor="end">%.0f</text>
<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="gray" stroke-dasharray="6 4"/>
<text x="%.0f" y="%.1f" fill="gray">quota %.0f/s</text>
<polyline fill="none" stroke="#c0392b" stroke-width="2" points="%s"/>
<polyline fill="none" stroke="#2471a3" stroke-width="2" points="%s"/>
<text x="%.0f" y="20" fill="#c0392b">without throttle</text>
<text x="%.0f" y="36" fill="#2471a3">with throttle (rule = quota), %d replicas sharing Redis</text>
</svg>
`, pad, height-pad, width-pad, height-pad,
		pad, pad, pad, height-pad,
		width/2, height-15, secs,
		height/2, height/2,
		pad-4, y(top/1.05), top/1.05,
		pad, y(quota), width-pad, y(quota),
		width-pad-90, y(quota)-4, quota,
		line(without), line(with),
		pad+10, pad+10, cfg.replicas)
	return err
}
