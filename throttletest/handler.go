package throttletest

import (
	"net/http"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
)

// Handler is a simulated provider as an [http.Handler], for a server of
// your own: it decides every request against its profile's rules, answers
// in the profile's shape, and records what it saw ([Handler.Report]).
// [NewServer] runs one on a loopback port.
//
// Create one with [NewHandler]; the zero Handler is not usable. It is safe
// for concurrent use: one lock guards its state, and neither the profile's
// Answer, the service time nor the next handler run under it.
type Handler struct {
	profile Profile
	clock   throttle.Clock
	service time.Duration
	next    http.Handler

	mu          sync.Mutex
	lim         *limiter
	outside     []outside
	pausedUntil time.Time
	rec         recorder
}

var _ http.Handler = (*Handler)(nil)

// outside is one outside consumer: its request and its next arrival.
type outside struct {
	req   *http.Request
	every time.Duration
	next  time.Time
}

// NewHandler returns a Handler simulating p. Invalid rules (the profile's
// or [WithRules]') are a *throttle.RuleError naming the rule and the
// field, and invalid options a *throttle.OptionError naming the option.
func NewHandler(p Profile, opts ...Option) (*Handler, error) {
	cfg := config{clock: systemClock{}}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if len(cfg.errs) > 0 {
		return nil, cfg.errs[0]
	}
	lim, err := newLimiter(append(append([]throttle.Rule(nil), p.Rules...), cfg.rules...))
	if err != nil {
		return nil, err
	}
	p.Rules = nil // the limiter's copies are the rules from now on
	start := cfg.clock.Now()
	h := &Handler{
		profile: p,
		clock:   cfg.clock,
		service: cfg.service,
		next:    cfg.next,
		lim:     lim,
		rec:     newRecorder(start),
	}
	for _, o := range cfg.outside {
		every := time.Duration(float64(time.Second) / o.perSecond)
		h.outside = append(h.outside, outside{req: o.req, every: every, next: start.Add(every)})
	}
	return h, nil
}

// Pause makes the server refuse every request for d from now, by its
// clock, as a provider does during an incident or after abuse: each
// refusal is the profile's answer to a paused [Decision] (a Wait of the
// pause's rest; the profiles send it as Retry-After). A pause never
// shortens one already running; d ≤ 0 does nothing.
func (h *Handler) Pause(d time.Duration) {
	if d <= 0 {
		return
	}
	until := h.clock.Now().Add(d)
	h.mu.Lock()
	if until.After(h.pausedUntil) {
		h.pausedUntil = until
	}
	h.mu.Unlock()
}

// Report returns what the server saw so far (see [Report]).
func (h *Handler) Report() Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now() // under the lock, as decide's
	h.catchUp(now)
	return h.rec.snapshot(now)
}

// ServeHTTP decides r and answers it in the profile's shape.
//
// A form body (application/x-www-form-urlencoded, as Twilio's API takes)
// is parsed before the decision, outside the lock, so that rules may read
// r.PostFormValue; a handler of [WithHandler] finds it in r.PostForm.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		_ = r.ParseForm() // a malformed form leaves PostForm empty: the rules see no sender
	}
	d, release, service := h.decide(r)
	a := h.answer(r, d)
	if d.Admitted {
		h.serve(r, service)
		if h.next != nil {
			addHeader(w.Header(), a.Header)
			h.next.ServeHTTP(w, r)
			h.leave(release, d.Now)
			return
		}
		// The request leaves service before its answer is written: a
		// client that has read the answer never finds itself still
		// counted in flight.
		h.leave(release, d.Now)
	}
	addHeader(w.Header(), a.Header)
	status := a.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if len(a.Body) > 0 {
		_, _ = w.Write(a.Body)
	}
}

func (h *Handler) answer(r *http.Request, d Decision) Answer {
	if h.profile.Answer != nil {
		return h.profile.Answer(r, d)
	}
	if d.Admitted {
		return Answer{}
	}
	return Answer{Status: http.StatusTooManyRequests}
}

// decide takes the decision on r under the lock and records it. An
// admitted request's service timer starts under the lock too, so that a
// request counted in flight is always asleep in its service time (a
// FakeClock's driver counts on it).
func (h *Handler) decide(r *http.Request) (Decision, func(), throttle.Timer) {
	// The instant is read under the lock, so that requests are decided
	// and recorded in the order of their instants, as a server's log
	// would see them.
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	h.catchUp(now)
	d := Decision{Now: now}
	var (
		v       verdict
		service throttle.Timer
	)
	if now.Before(h.pausedUntil) {
		d.Paused = true
		d.Wait = h.pausedUntil.Sub(now)
		// The rules the request meets, with their limits; nothing is
		// booked, and their state is not read.
		v = h.lim.decide(r, now, dry)
	} else {
		v = h.lim.decide(r, now, served)
		if v.admitted {
			d.Admitted = true
			if h.service > 0 {
				service = h.clock.NewTimer(h.service)
			}
			h.rec.inFlight++
			h.rec.r.MaxInFlight = max(h.rec.r.MaxInFlight, h.rec.inFlight)
		} else {
			d.Rule, d.Wait, d.Concurrency = v.rule, v.wait, v.byCap
		}
	}
	d.Quotas = v.quotas
	met := make([]string, len(v.quotas))
	inFlight := make(map[string]int, len(v.quotas))
	for i, q := range v.quotas {
		met[i] = q.Rule
		if q.Concurrency > 0 {
			inFlight[q.Rule] = q.InFlight
		}
	}
	reason := d.Rule
	if d.Paused {
		reason = PauseReason
	}
	h.rec.arrival(now, r.Method+" "+r.URL.Path, reason, met, inFlight)
	return d, v.release, service
}

// serve waits out the service time on the server's clock, or until the
// client gives up.
func (h *Handler) serve(r *http.Request, t throttle.Timer) {
	if t == nil {
		return
	}
	select {
	case <-t.C():
	case <-r.Context().Done():
		t.Stop()
	}
}

func (h *Handler) leave(release func(), since time.Time) {
	took := h.clock.Now().Sub(since)
	h.mu.Lock()
	h.rec.r.InService += took
	if release != nil {
		release()
	}
	h.rec.inFlight--
	h.mu.Unlock()
}

// catchUp counts the outside consumers' arrivals due by now, each at its
// own instant, in order of time.
func (h *Handler) catchUp(now time.Time) {
	for {
		k := -1
		for i := range h.outside {
			if !h.outside[i].next.After(now) && (k < 0 || h.outside[i].next.Before(h.outside[k].next)) {
				k = i
			}
		}
		if k < 0 {
			return
		}
		o := &h.outside[k]
		at := o.next
		o.next = o.next.Add(o.every)
		if at.Before(h.pausedUntil) {
			h.rec.r.Outside.Refused++
			continue
		}
		if v := h.lim.decide(o.req, at, virtual); v.admitted {
			h.rec.r.Outside.Admitted++
		} else {
			h.rec.r.Outside.Refused++
		}
	}
}

func addHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k], vs...)
	}
}
