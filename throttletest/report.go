package throttletest

import (
	"maps"
	"slices"
	"time"
)

// PauseReason is the reason [Report.Refused] counts the requests refused
// during a [Server.Pause] under.
const PauseReason = "pause"

// Report is what a simulated provider saw, from its start until the
// report was made. It is a copy: the server does not change it
// afterwards.
type Report struct {
	// Start is when the server started and End when the report was made,
	// by the server's clock.
	Start, End time.Time

	// Arrived, Admitted and Refused count the requests that came over
	// HTTP (not the outside consumer's): Refused by reason, the name of
	// the rule that refused a request or [PauseReason].
	Arrived  int
	Admitted int
	Refused  map[string]int

	// PerSecond counts the arrivals and admissions in each second since
	// Start: PerSecond[i] covers [Start+i s, Start+(i+1) s).
	PerSecond []Second

	// MaxInFlight is the most admitted requests in service at once (see
	// [WithServiceTime]).
	MaxInFlight int

	// InFlight is the admitted requests in service when the report was
	// made.
	InFlight int

	// InService is the admitted requests' time in service (from admission
	// until their answer is written), summed: over a span in which the
	// server was busy, InService divided by the span is the mean number in
	// flight.
	InService time.Duration

	// Rules reports each rule of the profile by name.
	Rules map[string]RuleReport

	// Endpoints reports each endpoint: the method and the URL path, as in
	// "GET /v1/customers".
	Endpoints map[string]Counts

	// Outside counts the outside consumer's requests (see
	// [WithOutsideConsumer]).
	Outside Counts
}

// Second is one second of a [Report].
type Second struct {
	Arrived, Admitted int
}

// Counts are requests admitted and refused.
type Counts struct {
	Admitted, Refused int
}

// RuleReport is one rule's part of a [Report]: the requests it met that
// were admitted, those it refused, and, for a rule with a Concurrency,
// the most in flight at once in one of its partitions.
type RuleReport struct {
	Admitted, Refused int
	MaxInFlight       int
}

// RefusedTotal returns the requests refused for any reason.
func (r Report) RefusedTotal() int {
	n := 0
	for _, v := range r.Refused {
		n += v
	}
	return n
}

// AdmittedBetween returns the requests admitted in the whole seconds
// [from, to) since Start (clamped to the report's seconds): a rate over a
// span that leaves out a first burst and a last partial second.
func (r Report) AdmittedBetween(from, to int) int {
	from, to = max(from, 0), min(to, len(r.PerSecond))
	n := 0
	for i := from; i < to; i++ {
		n += r.PerSecond[i].Admitted
	}
	return n
}

// recorder accumulates a Report under the Handler's lock.
type recorder struct {
	r        Report
	inFlight int
}

func newRecorder(start time.Time) recorder {
	return recorder{r: Report{
		Start:     start,
		Refused:   make(map[string]int),
		Rules:     make(map[string]RuleReport),
		Endpoints: make(map[string]Counts),
	}}
}

func (rc *recorder) arrival(at time.Time, endpoint string, refusedBy string, met []string, inFlight map[string]int) {
	r := &rc.r
	r.Arrived++
	i := max(0, int(at.Sub(r.Start)/time.Second))
	for len(r.PerSecond) <= i {
		r.PerSecond = append(r.PerSecond, Second{})
	}
	r.PerSecond[i].Arrived++
	e := r.Endpoints[endpoint]
	if refusedBy == "" {
		r.Admitted++
		r.PerSecond[i].Admitted++
		e.Admitted++
	} else {
		r.Refused[refusedBy]++
		e.Refused++
	}
	r.Endpoints[endpoint] = e
	for _, name := range met {
		rr := r.Rules[name]
		switch refusedBy {
		case "":
			rr.Admitted++
		case name:
			rr.Refused++
		}
		rr.MaxInFlight = max(rr.MaxInFlight, inFlight[name])
		r.Rules[name] = rr
	}
}

func (rc *recorder) snapshot(end time.Time) Report {
	r := rc.r
	r.End = end
	r.InFlight = rc.inFlight
	r.Refused = maps.Clone(r.Refused)
	r.Rules = maps.Clone(r.Rules)
	r.Endpoints = maps.Clone(r.Endpoints)
	r.PerSecond = slices.Clone(r.PerSecond)
	return r
}
