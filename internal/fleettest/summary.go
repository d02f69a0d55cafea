package fleettest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
)

// Error kinds counted in [Summary.Errors]: why a request got no response.
const (
	// ErrKindBeyondDeadline: the slot lay beyond the request's deadline.
	// Expected at the end of every run, whose end is every request's
	// deadline.
	ErrKindBeyondDeadline = "beyond_deadline"
	// ErrKindBeyondMaxWait: the slot lay beyond WithMaxWait.
	ErrKindBeyondMaxWait = "beyond_max_wait"
	// ErrKindQueueFull: the bucket had too many waiters.
	ErrKindQueueFull = "queue_full"
	// ErrKindStoreUnavailable: the shared store failed (fail-closed mode).
	ErrKindStoreUnavailable = "store_unavailable"
	// ErrKindInvalidRule: a rule rejected the request or the configuration.
	ErrKindInvalidRule = "invalid_rule"
	// ErrKindContext: the request's context ended while it waited for its
	// slot, before departure. Expected, rarely, at the end of a run: a
	// sleep that wakes late on a busy machine finds the run over.
	ErrKindContext = "context"
	// ErrKindInFlight: the request departed but got no response (its
	// context ended in flight, or the connection failed).
	ErrKindInFlight = "in_flight"
	// ErrKindOther: anything else (a Redis error surfacing, say). The
	// first messages are kept in [Summary.Samples].
	ErrKindOther = "other"
)

// maxSamples bounds the error messages a summary keeps.
const maxSamples = 5

// Summary is what a worker reports when it is done.
type Summary struct {
	ID int `json:"id"`
	// Attempts counts client.Do calls; Sent those handed to the network
	// (past the throttle).
	Attempts int `json:"attempts"`
	Sent     int `json:"sent"`
	// Statuses counts responses by status code.
	Statuses map[int]int `json:"statuses"`
	// Errors counts failed requests by kind (the ErrKind constants).
	Errors map[string]int `json:"errors"`
	// Samples holds the first few distinct error messages.
	Samples []string `json:"samples,omitempty"`
	// MaxWait is the longest time a request spent between client.Do and
	// departure: its wait for a slot, plus the store's round trips.
	MaxWait time.Duration `json:"max_wait"`
	// FirstSend and LastSend are the wall-clock departure times of the
	// first and last request sent (zero when none was).
	FirstSend time.Time `json:"first_send"`
	LastSend  time.Time `json:"last_send"`
	// Departures are the wall-clock departure times of every request sent,
	// in order, when WorkerConfig.RecordDepartures is set.
	Departures []time.Time `json:"departures,omitempty"`
	// Stalls are the times the worker process was not running, as its
	// stall watcher saw them during the run (see [StallThreshold]).
	Stalls []Stall `json:"stalls,omitempty"`
	// Flights sums up the round trips of the requests that got a
	// response.
	Flights Flights `json:"flights"`
	// Waits sums up the waits of the requests sent: from client.Do (or
	// the end of the previous attempt) to the departure.
	Waits Flights `json:"waits"`
	// ModeChanges are the Transport's changes of mode during the worker's
	// life (throttle.WithOnModeChange), at most maxModeChanges of them: a
	// replica that fell to its fallback for a moment explains a run's
	// failures that nothing on the wire does.
	ModeChanges []ModeChange `json:"mode_changes,omitempty"`
	// Start and End are the run's bounds as the worker saw them.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Killed is set by [Fleet.Wait] for a worker killed by [Fleet.Kill],
	// which reported nothing.
	Killed bool `json:"killed,omitempty"`
}

// Responses returns the number of responses of every status.
func (s *Summary) Responses() int {
	n := 0
	for _, c := range s.Statuses {
		n += c
	}
	return n
}

// ErrorCount returns the number of failed requests of every kind.
func (s *Summary) ErrorCount() int {
	n := 0
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// Flights sums up request round trips: from departure (past the throttle)
// to the response's header, as the worker measured them. The zero value
// means no request got a response.
type Flights struct {
	Count int `json:"count"`
	// P50, P90 and P99 are quantiles (nearest rank); Max the longest.
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// flightsOf sums up ds, which it sorts.
func flightsOf(ds []time.Duration) Flights {
	if len(ds) == 0 {
		return Flights{}
	}
	slices.Sort(ds)
	rank := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
	return Flights{Count: len(ds), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: ds[len(ds)-1]}
}

// tally accumulates a Summary from many goroutines.
type tally struct {
	record bool // keep every departure time

	mu      sync.Mutex
	s       Summary
	flights []time.Duration
	waits   []time.Duration
}

func newTally(id int, record bool) *tally {
	return &tally{record: record, s: Summary{ID: id, Statuses: map[int]int{}, Errors: map[string]int{}}}
}

// departed records a request handed to the network after waiting wait.
func (t *tally) departed(at time.Time, wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.Sent++
	if t.record {
		t.s.Departures = append(t.s.Departures, at)
	}
	t.s.MaxWait = max(t.s.MaxWait, wait)
	t.waits = append(t.waits, wait)
	if t.s.FirstSend.IsZero() || at.Before(t.s.FirstSend) {
		t.s.FirstSend = at
	}
	if at.After(t.s.LastSend) {
		t.s.LastSend = at
	}
}

// flown records the round trip of a request that got a response.
func (t *tally) flown(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flights = append(t.flights, d)
}

// done records the outcome of one client.Do and returns the error's kind,
// or "" for a response.
func (t *tally) done(status int, err error, departed bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.Attempts++
	if err == nil {
		t.s.Statuses[status]++
		return ""
	}
	kind := errKind(err, departed)
	t.s.Errors[kind]++
	if kind == ErrKindOther || kind == ErrKindInFlight {
		t.sampleLocked(err.Error())
	}
	return kind
}

// ModeChange is one change of a worker's Transport mode.
type ModeChange struct {
	At       time.Time `json:"at"`
	From, To string
	Err      string `json:"err,omitempty"`
}

// maxModeChanges bounds the mode changes a summary keeps.
const maxModeChanges = 16

// modeChanged records c.
func (t *tally) modeChanged(c throttle.ModeChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.s.ModeChanges) >= maxModeChanges {
		return
	}
	mc := ModeChange{At: c.At, From: c.From.String(), To: c.To.String()}
	if c.Err != nil {
		mc.Err = c.Err.Error()
	}
	t.s.ModeChanges = append(t.s.ModeChanges, mc)
}

func (t *tally) sampleLocked(msg string) {
	if len(t.s.Samples) >= maxSamples || slices.Contains(t.s.Samples, msg) {
		return
	}
	t.s.Samples = append(t.s.Samples, msg)
}

func (t *tally) summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.ModeChanges = slices.Clone(t.s.ModeChanges)
	slices.SortFunc(s.Departures, func(a, b time.Time) int { return a.Compare(b) })
	s.Flights = flightsOf(slices.Clone(t.flights))
	s.Waits = flightsOf(slices.Clone(t.waits))
	return s
}

// Stalls returns the stalls of every summary.
func Stalls(sums []Summary) []Stall {
	var out []Stall
	for _, s := range sums {
		out = append(out, s.Stalls...)
	}
	return out
}

// Departures returns the departures of every summary as offsets from
// epoch (a Server's Epoch), sorted: the fleet's sends as the workers saw
// them, comparable with the server's arrivals. The workers must have run
// with RecordDepartures.
func Departures(sums []Summary, epoch time.Time) []time.Duration {
	var out []time.Duration
	for _, s := range sums {
		for _, d := range s.Departures {
			out = append(out, d.Sub(epoch))
		}
	}
	slices.Sort(out)
	return out
}

// errKind classifies a client.Do error. The transport's typed errors come
// first: a WaitError past the deadline also matches
// context.DeadlineExceeded.
func errKind(err error, departed bool) string {
	switch {
	case departed:
		return ErrKindInFlight
	case errors.Is(err, throttle.ErrBeyondDeadline):
		return ErrKindBeyondDeadline
	case errors.Is(err, throttle.ErrBeyondMaxWait):
		return ErrKindBeyondMaxWait
	case errors.Is(err, throttle.ErrQueueFull):
		return ErrKindQueueFull
	case errors.Is(err, throttle.ErrStoreUnavailable):
		return ErrKindStoreUnavailable
	case errors.Is(err, throttle.ErrInvalidRule):
		return ErrKindInvalidRule
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return ErrKindContext
	}
	return ErrKindOther
}

// Totals sums the summaries of a fleet. Its Flights are the worst
// worker's: each quantile is the largest of the workers'.
func Totals(sums []Summary) Summary {
	t := Summary{ID: -1, Statuses: map[int]int{}, Errors: map[string]int{}}
	for _, s := range sums {
		t.Attempts += s.Attempts
		t.Sent += s.Sent
		t.MaxWait = max(t.MaxWait, s.MaxWait)
		t.Flights = Flights{
			Count: t.Flights.Count + s.Flights.Count,
			P50:   max(t.Flights.P50, s.Flights.P50), P90: max(t.Flights.P90, s.Flights.P90),
			P99: max(t.Flights.P99, s.Flights.P99), Max: max(t.Flights.Max, s.Flights.Max),
		}
		for k, v := range s.Statuses {
			t.Statuses[k] += v
		}
		for k, v := range s.Errors {
			t.Errors[k] += v
		}
		for _, m := range s.Samples {
			if len(t.Samples) < maxSamples {
				t.Samples = append(t.Samples, "worker "+strconv.Itoa(s.ID)+": "+m)
			}
		}
		if !s.FirstSend.IsZero() && (t.FirstSend.IsZero() || s.FirstSend.Before(t.FirstSend)) {
			t.FirstSend = s.FirstSend
		}
		if s.LastSend.After(t.LastSend) {
			t.LastSend = s.LastSend
		}
		if t.Start.IsZero() || s.Start.Before(t.Start) {
			t.Start = s.Start
		}
		if s.End.After(t.End) {
			t.End = s.End
		}
	}
	return t
}
