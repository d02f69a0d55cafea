package fleettest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// WorkerHeader carries the sender's id on every request a worker sends, so
// the server can tell the processes apart. Its value is the worker's index
// in the fleet, or "outside" for the outside consumer.
const WorkerHeader = "X-Fleet-Worker"

// WarmUpHeader marks the requests a worker sends before the start to open
// its connections. The server holds them for [WarmUpHold], so that they
// overlap and each opens a connection, answers 204 and does not record
// them.
const WarmUpHeader = "X-Fleet-Warm-Up"

// WarmUpHold is how long the server holds a warm-up request.
const WarmUpHold = 50 * time.Millisecond

// Worker ids of arrivals that do not come from a fleet worker.
const (
	// UnknownWorker marks a request without a valid [WorkerHeader].
	UnknownWorker = -1
	// OutsideWorker marks a request of the outside consumer
	// ([Server.StartOutside]).
	OutsideWorker = -2
)

// Arrival is one request as the recording server saw it.
type Arrival struct {
	// Seq is the request's rank in arrival order, from 1. It is what
	// [RespondNth] counts.
	Seq int
	// At is the arrival time: the monotonic time at the handler's entry, as
	// an offset from the server's epoch ([Server.Epoch]).
	At time.Duration
	// Worker is the sender's index in the fleet, [OutsideWorker] or
	// [UnknownWorker].
	Worker int
	// Status is the status code the server answered.
	Status int
	// InService is, with [WithConcurrency], the requests in service when
	// it arrived, itself included if it was served; 0 otherwise.
	InService int
}

// Arrivals is a list of arrivals with filters for analysis.
type Arrivals []Arrival

// Times returns the arrival times, in order.
func (as Arrivals) Times() []time.Duration {
	ts := make([]time.Duration, len(as))
	for i, a := range as {
		ts[i] = a.At
	}
	return ts
}

// Filter returns the arrivals for which keep returns true.
func (as Arrivals) Filter(keep func(Arrival) bool) Arrivals {
	var out Arrivals
	for _, a := range as {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// Fleet returns the arrivals sent by fleet workers.
func (as Arrivals) Fleet() Arrivals { return as.Filter(func(a Arrival) bool { return a.Worker >= 0 }) }

// Status returns the arrivals answered with the given status code.
func (as Arrivals) Status(code int) Arrivals {
	return as.Filter(func(a Arrival) bool { return a.Status == code })
}

// FromWorker returns the arrivals of one worker (or [OutsideWorker]).
func (as Arrivals) FromWorker(id int) Arrivals {
	return as.Filter(func(a Arrival) bool { return a.Worker == id })
}

// Response is a scripted answer.
type Response struct {
	Status int         // the status code; 0 means 200
	Header http.Header // added to the response; may be nil
}

// ServerOption configures a recording server.
type ServerOption interface {
	apply(*Server)
}

type serverOptionFunc func(*Server)

func (f serverOptionFunc) apply(s *Server) { f(s) }

// RespondNth answers the k-th arrival (Seq k, counted over every sender,
// from 1) with r instead of the usual answer. It may be given for several
// k; the last one given for a k wins. The k-th arrival does not count
// against a [Quota].
func RespondNth(k int, r Response) ServerOption {
	return serverOptionFunc(func(s *Server) { s.nth[k] = r })
}

// RespondNthOfFleet is [RespondNth] counting only the fleet's arrivals
// (those of a worker, not of the outside consumer or an unknown sender):
// the k-th of them is answered r, and does not count against a [Quota].
func RespondNthOfFleet(k int, r Response) ServerOption {
	return serverOptionFunc(func(s *Server) { s.nthFleet[k] = r })
}

// WithQuota makes the server enforce q.
func WithQuota(q Quota) ServerOption {
	return serverOptionFunc(func(s *Server) { s.quota = q })
}

// WithConcurrency makes the server a strict concurrency limiter: it serves
// each request in service (sleeping that long before it answers) and
// rejects a request that arrives while limit others are in service with a
// 429 at once, as Twilio's 20429 does; every answer carries
// Twilio-Concurrent-Requests, the requests in service when it came. A
// request leaves service before its
// answer is written, so a client that has read the answer never finds
// itself still counted. It records the most requests in service at once
// ([Server.MaxInService]).
func WithConcurrency(limit int, service time.Duration) ServerOption {
	return serverOptionFunc(func(s *Server) { s.concLimit, s.service = limit, service })
}

// Server is a recording HTTP server on a loopback port: it records the
// arrival of every request and answers 200 "ok", or a scripted answer
// ([RespondNth], [WithQuota], [Server.Refuse]). Its handler never fails the test; everything
// it sees is recorded for the test goroutine to check.
//
// Create one with [NewServer]; it is closed by the test's cleanup. Its
// methods are safe for concurrent use.
type Server struct {
	// URL is the server's base URL, such as http://127.0.0.1:1234.
	URL string

	srv      *httptest.Server
	epoch    time.Time // carries a monotonic reading: offsets use it
	nth      map[int]Response
	nthFleet map[int]Response
	quota    Quota
	shape    Shape // the quota's

	points    *pointsQuota  // see WithPoints; nil: none
	concLimit int           // see WithConcurrency; 0: no cap
	service   time.Duration // how long a request is in service

	mu       sync.Mutex
	fleetSeq int // the fleet's arrivals so far, for nthFleet
	arrivals []Arrival
	counter  counter  // the quota's window
	refusals []Window // see Refuse

	inService    int // requests in service now (WithConcurrency)
	maxInService int
	served       int           // requests served (WithConcurrency)
	inServiceFor time.Duration // their time in service, summed
}

// MeanService returns, with [WithConcurrency], how long the requests the
// server served were in service on average: the service time asked for,
// plus what the server's sleep overshot it by on this machine. 0 before
// the first one.
func (s *Server) MeanService() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served == 0 {
		return 0
	}
	return s.inServiceFor / time.Duration(s.served)
}

// MaxInService returns the most requests the server had in service at
// once (counting only those it served, see [WithConcurrency]).
func (s *Server) MaxInService() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInService
}

// NewServer starts a recording server, closed by t.Cleanup.
func NewServer(t testing.TB, opts ...ServerOption) *Server {
	t.Helper()
	s := &Server{nth: make(map[int]Response), nthFleet: make(map[int]Response)}
	for _, o := range opts {
		o.apply(s)
	}
	if err := s.quota.validate(); err != nil {
		t.Fatalf("%v", err)
	}
	s.shape = s.quota.shape()
	s.counter = counter{kind: s.quota.Kind, limit: s.quota.Limit, window: s.quota.Window}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// A fleet opens dozens of keep-alive connections; the defaults suit.
	s.epoch = time.Now()
	if s.quota.UnixAligned || s.quota.Kind == SlidingCounter {
		epoch := s.epoch
		s.counter.unixAt = func(d time.Duration) int64 { return epoch.Add(d).UnixMicro() }
	}
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Epoch returns the instant arrival offsets count from.
func (s *Server) Epoch() time.Time { return s.epoch }

// Offset returns t as an offset from the epoch, comparable with
// [Arrival.At]. A t read from time.Now in this process compares by the
// monotonic clock; a t decoded from another process (wall clock only) by
// the wall clock.
func (s *Server) Offset(t time.Time) time.Duration { return t.Sub(s.epoch) }

// Arrivals returns a copy of every arrival so far, sorted by arrival time.
func (s *Server) Arrivals() Arrivals {
	s.mu.Lock()
	out := slices.Clone(s.arrivals)
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Arrival) int { return int(a.At - b.At) })
	return out
}

// Count returns the number of arrivals so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.arrivals)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Since(s.epoch)
	if r.Header.Get(WarmUpHeader) != "" {
		time.Sleep(WarmUpHold)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	worker := parseWorker(r.Header.Get(WorkerHeader))
	// Bodies are tiny or absent; draining keeps the connection reusable.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))

	s.mu.Lock()
	seq := len(s.arrivals) + 1
	resp, scripted := s.nth[seq]
	if worker >= 0 {
		s.fleetSeq++
		if r, ok := s.nthFleet[s.fleetSeq]; ok && !scripted {
			resp, scripted = r, true
		}
	}
	if !scripted {
		resp = s.applyQuotaLocked(at)
	}
	var cost PointsCost
	if s.points != nil && !scripted && resp.Status == 0 {
		resp, cost = s.points.takeLocked(r, seq, at)
	}
	serving, inService := false, 0
	if s.concLimit > 0 && resp.Status == 0 {
		inService = s.inService
		if s.inService >= s.concLimit {
			resp = Response{Status: http.StatusTooManyRequests}
		} else {
			serving = true
			s.inService++
			inService = s.inService
			s.maxInService = max(s.maxInService, s.inService)
		}
		// As Twilio does, every answer counts the requests in service.
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		resp.Header.Set("Twilio-Concurrent-Requests", strconv.Itoa(s.inService))
	}
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	s.arrivals = append(s.arrivals, Arrival{Seq: seq, At: at, Worker: worker, Status: resp.Status, InService: inService})
	s.mu.Unlock()
	if serving {
		began := time.Now()
		time.Sleep(s.service)
		s.mu.Lock()
		s.inService--
		s.served++
		s.inServiceFor += time.Since(began)
		s.mu.Unlock()
	}
	if cost.Requested != cost.Actual {
		s.mu.Lock()
		s.points.settleLocked(cost, time.Since(s.epoch))
		s.mu.Unlock()
	}

	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.Status)
	_, _ = io.WriteString(w, "ok\n")
}

func parseWorker(v string) int {
	if v == "outside" {
		return OutsideWorker
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return UnknownWorker
	}
	return n
}
