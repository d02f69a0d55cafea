package fleettest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timeouts of the parent side. They are generous: a race-enabled test
// binary starting four times on a busy two-core machine takes seconds.
const (
	// ReadyTimeout bounds the wait for every worker's ready line.
	ReadyTimeout = 60 * time.Second
	// StartDelay is how far ahead of Go's call the common start lies, so
	// every worker has read the signal before it.
	StartDelay = 200 * time.Millisecond
	// ExitGrace is how long after its run a worker may take to exit.
	ExitGrace = 60 * time.Second
	// stderrTail bounds the stderr kept per worker for failure messages.
	stderrTail = 16 << 10
)

// Fleet is a set of worker processes, each running a [WorkerConfig] it
// reads from [EnvWorker]: the fleetworker command (see the package doc). Create one with [Start], start
// the run with [Fleet.Go], collect with [Fleet.Wait]. Every process is
// killed and reaped by the test's cleanup (and by the kernel, on Linux, if
// the test binary dies first).
//
// A Fleet's methods must be called from the test's goroutine: they fail the
// test with t.Fatalf.
type Fleet struct {
	t       testing.TB
	workers []*worker
	start   time.Time
}

// worker is the parent's handle on one process.
type worker struct {
	cfg     WorkerConfig
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *tailBuffer
	ready   chan struct{} // closed at the ready line
	exited  chan struct{} // closed once stdout is drained and the process reaped
	summary string        // the summary line's JSON; valid after exited
	waitErr error         // valid after exited
	killed  bool
}

// Start launches one worker process per config (ID set to its index) and
// waits until each has built its transport, reached Redis and printed its
// ready line. It fails the test if a worker cannot start, exits early or is
// not ready within [ReadyTimeout]. The test binary's TestMain must call
// [DispatchWorker].
func Start(t testing.TB, cfgs ...WorkerConfig) *Fleet {
	t.Helper()
	f := &Fleet{t: t}
	for i, cfg := range cfgs {
		cfg.ID = i
		if err := cfg.validate(); err != nil {
			t.Fatalf("%v", err)
		}
		w, err := launch(cfg)
		if err != nil {
			t.Fatalf("fleettest: start worker %d: %v", i, err)
		}
		t.Cleanup(w.stop)
		f.workers = append(f.workers, w)
	}
	deadline := time.NewTimer(ReadyTimeout)
	defer deadline.Stop()
	for _, w := range f.workers {
		select {
		case <-w.ready:
		case <-w.exited:
			t.Fatalf("fleettest: worker %d exited before it was ready: %v\n%s", w.cfg.ID, w.waitErr, w.stderr)
		case <-deadline.C:
			t.Fatalf("fleettest: worker %d not ready after %v\n%s", w.cfg.ID, ReadyTimeout, w.stderr)
		}
	}
	return f
}

func launch(cfg WorkerConfig) (*worker, error) {
	js, err := cfg.encode()
	if err != nil {
		return nil, err
	}
	cmd, err := workerCommand()
	if err != nil {
		return nil, err
	}
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvWorker+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, EnvWorker+"="+js)
	setDeathSignal(cmd)
	w := &worker{cfg: cfg, cmd: cmd, stderr: &tailBuffer{max: stderrTail}, ready: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go w.follow(stdout)
	return w, nil
}

// follow reads the worker's stdout to the end, then reaps the process.
func (w *worker) follow(stdout io.Reader) {
	defer close(w.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	ready := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == readyLine && !ready:
			ready = true
			close(w.ready)
		case strings.HasPrefix(line, summaryPrefix):
			w.summary = strings.TrimPrefix(line, summaryPrefix)
		default:
			// Anything else a worker prints goes with its stderr, for
			// failure messages.
			_, _ = fmt.Fprintln(w.stderr, line)
		}
	}
	// Drain whatever a scanner error left, so the process never blocks
	// on a full pipe.
	_, _ = io.Copy(io.Discard, stdout)
	w.waitErr = w.cmd.Wait()
}

// stop kills the process if it still runs and waits until it is reaped.
func (w *worker) stop() {
	_ = w.stdin.Close() // EOF unblocks a worker still waiting for its start
	select {
	case <-w.exited:
		return
	default:
	}
	_ = w.cmd.Process.Kill() // fails only if it already exited
	<-w.exited
}

// Go sends the start signal: every worker starts sending at the same
// instant, [StartDelay] from now, and stops Duration after it. Go returns
// that instant, read from this process's monotonic clock, so
// Server.Offset(start) places it among the arrivals.
func (f *Fleet) Go() time.Time {
	f.t.Helper()
	return f.GoAt(time.Now().Add(StartDelay))
}

// GoAt is [Fleet.Go] with the start at the given instant, read from this
// process's clock (time.Now plus an offset), which should lie at least
// [StartDelay] ahead so that every worker reads the signal before it; a
// test uses it to put the start on a boundary it needs, such as a whole
// Unix second. An instant less than half of StartDelay ahead fails the
// test.
func (f *Fleet) GoAt(start time.Time) time.Time {
	f.t.Helper()
	if !f.start.IsZero() {
		f.t.Fatalf("fleettest: Go called twice")
	}
	if ahead := time.Until(start); ahead < StartDelay/2 {
		f.t.Fatalf("fleettest: the start lies %v ahead, less than half of StartDelay (%v)", ahead, StartDelay)
	}
	f.start = start
	msg, err := json.Marshal(startMessage{Start: f.start})
	if err != nil {
		f.t.Fatalf("fleettest: encode start signal: %v", err)
	}
	msg = append(msg, '\n')
	for _, w := range f.workers {
		if _, err := w.stdin.Write(msg); err != nil {
			f.t.Fatalf("fleettest: start worker %d: %v\n%s", w.cfg.ID, err, w.stderr)
		}
	}
	return f.start
}

// Kill kills worker i at once (SIGKILL), as a crash would. Its summary is
// then the zero Summary with ID i and Killed set.
func (f *Fleet) Kill(i int) {
	f.t.Helper()
	w := f.workers[i]
	w.killed = true
	if err := w.cmd.Process.Kill(); err != nil {
		f.t.Fatalf("fleettest: kill worker %d: %v", i, err)
	}
}

// Len returns the number of workers.
func (f *Fleet) Len() int { return len(f.workers) }

// Wait waits for every worker to finish its run and returns their
// summaries, in worker order. It fails the test if a worker fails, exits
// without a summary, or is still running [ExitGrace] after its run.
func (f *Fleet) Wait() []Summary {
	f.t.Helper()
	if f.start.IsZero() {
		f.t.Fatalf("fleettest: Wait called before Go")
	}
	sums := make([]Summary, len(f.workers))
	for i, w := range f.workers {
		limit := time.Until(f.start.Add(w.cfg.Duration + ExitGrace))
		timer := time.NewTimer(limit)
		select {
		case <-w.exited:
			timer.Stop()
		case <-timer.C:
			w.stop()
			f.t.Fatalf("fleettest: worker %d still running %v after its run\n%s", i, ExitGrace, w.stderr)
		}
		if w.killed {
			sums[i] = Summary{ID: i, Killed: true}
			continue
		}
		if w.waitErr != nil || w.summary == "" {
			f.t.Fatalf("fleettest: worker %d failed (%v) without a summary:\n%s", i, w.waitErr, w.stderr)
		}
		if err := json.Unmarshal([]byte(w.summary), &sums[i]); err != nil {
			f.t.Fatalf("fleettest: worker %d: decode summary: %v", i, err)
		}
	}
	return sums
}

// Stderr returns the tail of worker i's stderr (and stray stdout), for
// failure messages.
func (f *Fleet) Stderr(i int) string { return f.workers[i].stderr.String() }

// Result is what [Run] returns.
type Result struct {
	Start     time.Time // the common start, from this process's clock
	Summaries []Summary // one per worker, in order
}

// Run starts a fleet, runs it and waits for it: Start, Go and Wait.
func Run(t testing.TB, cfgs ...WorkerConfig) Result {
	t.Helper()
	f := Start(t, cfgs...)
	start := f.Go()
	return Result{Start: start, Summaries: f.Wait()}
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	max int

	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
