// Command fleetchart draws, as an SVG chart, the requests per second a pool
// of workers sends to a rate-limited API over time, against the API's
// quota: first without a throttle, then through a [throttle.Transport]
// whose rule is the quota. The API is an in-process httptest server that
// answers after a fixed latency, so the run needs no network.
//
//	go run ./cmd/fleetchart -quota 100 -workers 20 -duration 5s -o chart.svg
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

	"github.com/throttlekit/throttle"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.quota, "quota", 100, "the API's quota, requests per second")
	flag.IntVar(&cfg.workers, "workers", 20, "concurrent workers")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "length of each run")
	flag.DurationVar(&cfg.latency, "latency", 20*time.Millisecond, "the API's latency")
	out := flag.String("o", "fleetchart.svg", "the SVG file to write")
	flag.Parse()
	if err := run(cfg, *out); err != nil {
		fmt.Fprintln(os.Stderr, "fleetchart:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	quota, workers    int
	duration, latency time.Duration
}

func run(cfg config, out string) error {
	if cfg.quota <= 0 || cfg.workers <= 0 || cfg.duration <= 0 {
		return errors.New("quota, workers and duration must be positive")
	}
	without, err := measure(cfg, nil)
	if err != nil {
		return err
	}
	with, err := measure(cfg, throttled(cfg))
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := render(f, float64(cfg.quota), without, with); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// throttled returns the wrapping of a base transport in a Transport whose
// one rule is cfg's quota.
func throttled(cfg config) func(http.RoundTripper) http.RoundTripper {
	return func(base http.RoundTripper) http.RoundTripper {
		return throttle.NewTransport(base, throttle.WithRules(throttle.Rule{
			Name:  "api",
			Limit: throttle.Limit{Rate: cfg.quota, Period: time.Second, Burst: max(cfg.quota/10, 1)},
		}))
	}
}

// bin is the width of one sample of the chart.
const bin = 100 * time.Millisecond

// measure runs cfg.workers workers against a fresh API for cfg.duration,
// through the transport wrap makes of the default one (none if wrap is
// nil), and returns the requests per second the API received, over the
// last second, at every bin.
func measure(cfg config, wrap func(http.RoundTripper) http.RoundTripper) ([]float64, error) {
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
	var rt http.RoundTripper = base
	if wrap != nil {
		rt = wrap(base)
	}
	client := &http.Client{Transport: rt}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.workers {
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

// render writes the chart of the two series against the quota line.
func render(w io.Writer, quota float64, without, with []float64) error {
	const width, height, pad = 800.0, 400.0, 50.0
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
	_, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>
<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>
<text x="%.0f" y="%.0f" text-anchor="middle">time (s, 0 to %.1f)</text>
<text x="12" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">requests per second (last second)</text>
<text x="%.0f" y="%.1f" text-anchor="end">%.0f</text>
<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="gray" stroke-dasharray="6 4"/>
<text x="%.0f" y="%.1f" fill="gray">quota %.0f/s</text>
<polyline fill="none" stroke="#c0392b" stroke-width="2" points="%s"/>
<polyline fill="none" stroke="#2471a3" stroke-width="2" points="%s"/>
<text x="%.0f" y="20" fill="#c0392b">without throttle</text>
<text x="%.0f" y="36" fill="#2471a3">with throttle (rule = quota)</text>
</svg>
`, width, height,
		pad, height-pad, width-pad, height-pad,
		pad, pad, pad, height-pad,
		width/2, height-15, secs,
		height/2, height/2,
		pad-4, y(top/1.05), top/1.05,
		pad, y(quota), width-pad, y(quota),
		width-pad-90, y(quota)-4, quota,
		line(without), line(with),
		pad+10, pad+10)
	return err
}
