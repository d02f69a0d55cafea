package fleettest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttle"
)

// Lines of the worker protocol. A worker prints readyLine on stdout once
// its transport is built and Redis answers, waits for one startMessage line
// on stdin, runs, and prints summaryPrefix followed by its Summary as JSON.
const (
	readyLine     = "FLEETTEST READY"
	summaryPrefix = "FLEETTEST SUMMARY "
)

// errorPause is how long a goroutine rests after a request failed at once,
// so that a transport failing fast (fail-closed, a full queue) is not
// hammered by a spinning loop.
const errorPause = 10 * time.Millisecond

// defaultFlight bounds a departed request when RequestTimeout is not set.
const defaultFlight = 30 * time.Second

// startMessage is the start signal the parent writes to every worker.
type startMessage struct {
	Start time.Time `json:"start"` // wall clock: the processes share one machine
}

// OptionsFunc turns the knobs of a [WorkerConfig] that fleettest does not
// apply itself (Fallback, RedisTimeout, Extra) into transport
// options. It runs in the worker process, before the transport is built; an
// error fails the worker. A test package that sets such knobs passes its
// OptionsFunc to [DispatchWorker], and takes responsibility for every knob
// it sets.
type OptionsFunc func(WorkerConfig) ([]throttle.Option, error)

// DispatchWorker makes the test binary a worker when it was started by
// [Start]: if [EnvWorker] is set it runs the worker, with extra (which may
// be nil) for the knobs fleettest does not apply, and exits the process
// with status 0 on success or 1 after printing the error on stderr.
// Otherwise it returns at once. Call it first in TestMain, before
// goleak.VerifyTestMain or m.Run:
//
//	func TestMain(m *testing.M) {
//		fleettest.DispatchWorker(nil)
//		goleak.VerifyTestMain(m)
//	}
func DispatchWorker(extra OptionsFunc) {
	cfg, ok := os.LookupEnv(EnvWorker)
	if !ok {
		return
	}
	if err := RunWorker(cfg, extra, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "fleettest worker: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RunWorker runs one worker with the JSON config cfgJSON: it builds the
// transport, prints the ready line on out, waits for the start signal on
// in, sends until the run ends and prints its Summary on out. It is what
// [DispatchWorker] runs; tests may call it in process to debug a worker.
func RunWorker(cfgJSON string, extra OptionsFunc, in io.Reader, out io.Writer) error {
	cfg, err := decodeConfig(cfgJSON)
	if err != nil {
		return err
	}
	opts, err := transportOptions(cfg, extra)
	if err != nil {
		return err
	}
	tally := newTally(cfg.ID, cfg.RecordDepartures)
	if dir := os.Getenv(EnvWorkerLog); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.log", cfg.ID)))
		if err != nil {
			return fmt.Errorf("worker log: %w", err)
		}
		defer func() { _ = f.Close() }()
		level := slog.LevelInfo
		if os.Getenv(EnvWorkerLogLevel) == "debug" {
			level = slog.LevelDebug
		}
		opts = append(opts, throttle.WithLogger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: level}))))
	}
	// First, so that an OptionsFunc's own WithOnModeChange (faulttest's)
	// takes its place.
	opts = append([]throttle.Option{throttle.WithOnModeChange(tally.modeChanged)}, opts...)
	if len(cfg.RedisAddrs) > 0 {
		rdb := redis.NewUniversalClient(&redis.UniversalOptions{
			Addrs:    cfg.RedisAddrs,
			Username: cfg.RedisUsername,
			Password: cfg.RedisPassword,
			PoolSize: cfg.Goroutines + 4,
			// Connections dialled before the start keep dial latency
			// out of the first slots.
			MinIdleConns: cfg.Goroutines,
		})
		// Close errors only say the client is already closed.
		defer func() { _ = rdb.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err != nil {
			return fmt.Errorf("ping redis %v: %w", cfg.RedisAddrs, err)
		}
		opts = append(opts, redisOptions(cfg, rdb)...)
	}

	net := &http.Transport{
		MaxIdleConnsPerHost: cfg.Goroutines * 2,
		IdleConnTimeout:     30 * time.Second,
	}
	defer net.CloseIdleConnections()
	flight := cfg.RequestTimeout
	if flight <= 0 {
		flight = defaultFlight
	}
	tr, err := throttle.New(&departures{next: net, tally: tally, flight: flight}, opts...)
	if err != nil {
		return fmt.Errorf("build transport: %w", err)
	}
	defer func() { _ = tr.Close() }()
	client := &http.Client{Transport: tr}
	if err := warmUp(net, cfg); err != nil {
		return err
	}

	if _, err := fmt.Fprintln(out, readyLine); err != nil {
		return fmt.Errorf("write ready line: %w", err)
	}
	line, err := bufio.NewReader(in).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("wait for the start signal: %w", err)
	}
	var msg startMessage
	if err := json.Unmarshal(line, &msg); err != nil {
		return fmt.Errorf("decode the start signal %q: %w", line, err)
	}

	time.Sleep(time.Until(msg.Start))
	watch := startStallWatch()
	run(client, cfg, msg.Start, tally)
	stalls := watch.end()

	s := tally.summary()
	s.Stalls = stalls
	s.Start, s.End = msg.Start, msg.Start.Add(cfg.Duration)
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	if _, err := fmt.Fprintf(out, "%s%s\n", summaryPrefix, b); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// warmUp opens one connection per goroutine to the server before the
// start, so that no slot of the run is spent waiting for a TCP dial (on a
// busy machine, dials finishing at different times bunch the first
// departures). Its requests overlap, because the server holds warm-up
// requests briefly, and they are not recorded as arrivals.
func warmUp(net *http.Transport, cfg WorkerConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, cfg.Goroutines)
	for range cfg.Goroutines {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set(WarmUpHeader, "1")
			resp, err := net.RoundTrip(req)
			if err != nil {
				errs <- err
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close() // the body is read; a close error changes nothing
			errs <- err
		}()
	}
	var first error
	for range cfg.Goroutines {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("warm up connections to %s: %w", cfg.URL, first)
	}
	return nil
}

// transportOptions returns the options cfg asks for, except Redis.
func transportOptions(cfg WorkerConfig, extra OptionsFunc) ([]throttle.Option, error) {
	rules := make([]throttle.Rule, len(cfg.Rules))
	for i, rc := range cfg.Rules {
		rules[i] = rc.Rule()
	}
	opts := []throttle.Option{throttle.WithRules(rules...)}
	if cfg.Headroom != nil {
		opts = append(opts, throttle.WithHeadroom(*cfg.Headroom))
	}
	if cfg.MaxWait > 0 {
		opts = append(opts, throttle.WithMaxWait(cfg.MaxWait))
	}
	if cfg.MaxQueue > 0 {
		opts = append(opts, throttle.WithMaxQueue(cfg.MaxQueue))
	}
	if cfg.NoFeedback {
		opts = append(opts, throttle.WithoutFeedback())
	}
	if len(cfg.Dialects) > 0 {
		ds, err := dialectsOf(cfg.Dialects)
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", cfg.ID, err)
		}
		opts = append(opts, throttle.WithDialects(ds...))
	}
	if cfg.MaxAttempts > 0 {
		opts = append(opts, throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: cfg.MaxAttempts}))
	}
	if cfg.LeaseTTL > 0 {
		opts = append(opts, throttle.WithLeaseTTL(cfg.LeaseTTL))
	}
	if extra == nil {
		if knob := unappliedKnob(cfg); knob != "" {
			return nil, fmt.Errorf("worker %d: %s is set but no OptionsFunc was given to DispatchWorker to apply it", cfg.ID, knob)
		}
		return opts, nil
	}
	more, err := extra(cfg)
	if err != nil {
		return nil, fmt.Errorf("worker %d: options: %w", cfg.ID, err)
	}
	return append(opts, more...), nil
}

// unappliedKnob names the first knob fleettest cannot apply on its own.
func unappliedKnob(cfg WorkerConfig) string {
	switch {
	case cfg.Fallback != "":
		return "Fallback"
	case cfg.RedisTimeout > 0:
		return "RedisTimeout"
	case len(cfg.Extra) > 0:
		return "Extra"
	}
	return ""
}

// run sends requests from cfg.Goroutines goroutines until end.
func run(client *http.Client, cfg WorkerConfig, start time.Time, tally *tally) {
	end := start.Add(cfg.Duration)
	var attempts atomic.Int64
	var wg sync.WaitGroup
	for g := range cfg.Goroutines {
		// Paced goroutines start spread over one interval rather than
		// all at once.
		phase := time.Duration(0)
		if cfg.Interval > 0 {
			phase = cfg.Interval * time.Duration(g) / time.Duration(cfg.Goroutines)
		}
		wg.Go(func() {
			for k := int64(0); ; k++ {
				if cfg.Interval > 0 {
					next := start.Add(phase + time.Duration(k)*cfg.Interval)
					if late := time.Since(next); late > 0 {
						// Skip the ticks already missed.
						k += int64(late / cfg.Interval)
						next = start.Add(phase + time.Duration(k)*cfg.Interval)
					}
					time.Sleep(time.Until(next))
				}
				if !time.Now().Before(end) {
					return
				}
				if cfg.Requests > 0 && attempts.Add(1) > int64(cfg.Requests) {
					return
				}
				method := http.MethodGet
				if len(cfg.Methods) > 0 {
					method = cfg.Methods[g%len(cfg.Methods)]
				}
				switch kind := send(client, cfg, method, end, tally); kind {
				case "":
				case ErrKindBeyondDeadline:
					// Slots only lie further ahead from here on.
					return
				default:
					// An immediate failure (fail-closed, a full
					// queue) must not turn the loop into a spin.
					time.Sleep(errorPause)
				}
			}
		})
	}
	wg.Wait()
}

// probeKey keys the request's probe in its context.
type probeKey struct{}

// probe follows one client.Do through the transport.
type probe struct {
	mu       sync.Mutex
	since    time.Time // the call, or the end of the previous attempt
	departed bool
}

// send makes one request, records its outcome and returns the kind of its
// error, or "".
func send(client *http.Client, cfg WorkerConfig, method string, end time.Time, tally *tally) string {
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	if cfg.RequestTimeout > 0 {
		var cancel2 context.CancelFunc
		ctx, cancel2 = context.WithTimeout(ctx, cfg.RequestTimeout)
		defer cancel2()
	}
	p := &probe{since: time.Now()}
	ctx = context.WithValue(ctx, probeKey{}, p)
	if cfg.Priority != "" {
		prio, _ := priorityOf(cfg.Priority) // validated with the config
		ctx = throttle.WithPriority(ctx, prio)
	}
	req, err := http.NewRequestWithContext(ctx, method, cfg.URL, nil)
	if err != nil {
		return tally.done(0, err, false)
	}
	req.Header.Set(WorkerHeader, strconv.Itoa(cfg.ID))
	resp, err := client.Do(req)
	p.mu.Lock()
	departed := p.departed
	p.mu.Unlock()
	if err != nil {
		return tally.done(0, err, departed)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // the body is read; a close error changes nothing
	if err != nil {
		return tally.done(0, err, true)
	}
	return tally.done(resp.StatusCode, nil, true)
}

// departures is the base transport under the throttle: it records each
// departure and the wait before it.
type departures struct {
	next   http.RoundTripper
	tally  *tally
	flight time.Duration // bounds a departed request
}

// cancelOnClose releases a departed request's context with its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func (d *departures) RoundTrip(r *http.Request) (*http.Response, error) {
	now := time.Now()
	if p, ok := r.Context().Value(probeKey{}).(*probe); ok {
		p.mu.Lock()
		wait := now.Sub(p.since)
		p.departed = true
		p.mu.Unlock()
		d.tally.departed(now, wait)
		// The run's end bounds the wait for a slot, not the flight: a
		// request that departed completes under its own timeout.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), d.flight)
		resp, err := d.next.RoundTrip(r.WithContext(ctx))
		if err != nil {
			cancel()
		} else {
			d.tally.flown(time.Since(now))
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		}
		p.mu.Lock()
		p.since = time.Now() // a retry's wait counts from here
		p.mu.Unlock()
		return resp, err
	}
	return d.next.RoundTrip(r)
}
