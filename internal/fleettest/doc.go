// Package fleettest runs fleets of real worker processes through a throttle
// Transport against a recording HTTP server, for the tests that must show
// what a whole fleet does: that N processes sharing one bucket stay under
// the quota and use nearly all of it, that a 429 pauses every process, that
// a Redis outage does not multiply the rate.
//
// # Workers
//
// A worker is the fleetworker command (internal/fleettest/fleetworker),
// which [Start] builds once per test binary without the race detector and
// runs with [EnvWorker] set to its [WorkerConfig] as JSON. A fleet test
// measures throughput and timing at a quota, which the race detector's CPU
// cost distorts on a small machine (binary.go tells the measurement); the
// product's races are hunted in the in-process tests, all under -race.
// fleetworker understands faulttest's knobs (faulttest.Options). With
// [EnvRaceWorkers]=1 the workers are the test binary itself, re-executed,
// race detector and all; for that the test package's TestMain must hand
// such a process to [DispatchWorker] before anything else:
//
//	func TestMain(m *testing.M) {
//		fleettest.DispatchWorker(nil) // or an OptionsFunc for extra knobs
//		goleak.VerifyTestMain(m)
//	}
//
// A worker builds a throttle Transport from its config (rules, headroom,
// max wait, Redis addresses and namespace, provider dialects by name, or
// no feedback at all), prints a ready line, waits for the common start
// signal on stdin, then runs Goroutines goroutines that each loop over GET
// URL until start + Duration (optionally paced by Interval, or stopped
// after Requests), and prints a [Summary]: requests sent, responses by
// status, errors by kind, the longest wait, the round trips' quantiles.
//
// [Start] launches the processes and waits until all are ready, so slow
// start-up (a busy machine, the worker's first build) never eats into the
// run; [Fleet.Go] gives them one start instant ([Fleet.GoAt] a chosen
// one, such as a whole Unix second); [Fleet.Wait] collects the
// summaries. [Run] does all three. Workers die with the test binary
// (Pdeathsig on Linux) and are killed and reaped by the test's cleanup.
//
// # Recording server
//
// [NewServer] starts an httptest server that records the monotonic arrival
// time of every request at the handler's entry, and the sending worker
// ([WorkerHeader]). Its answers can be scripted: [RespondNth] answers one
// request with, say, 429 and Retry-After; [WithQuota] enforces a strict
// limit as a real API does, counted in a sliding log or in fixed windows
// ([WindowKind]), and words its answers in a [Shape]: the rate-limit
// fields and the rejection of one real provider (X-RateLimit-* in five
// encodings, IETF RateLimit, GitHub, OpenAI, Shopify, Stripe, Retry-After
// alone or nothing; [Shapes] lists them). [Server.Refuse] makes the
// provider refuse everything for a while, in the same shape.
// [Server.StartOutside] spends part of the quota from an unthrottled
// consumer in the test process.
//
// # Analysis
//
// [MaxInWindow], [CountIn], [RateIn], [FirstIn], [PerSecond] and [Span]
// work on arrival offsets ([Arrivals.Times]), or on the workers' own
// departure times ([Departures], with WorkerConfig.RecordDepartures).
//
// # Stalls
//
// On a busy machine the OS may not run a process for tens of milliseconds;
// the requests whose slots fell in that time then leave together, and a
// window at the server holds more than the limiter scheduled. Every worker
// reports the stalls it measured (Summary.Stalls) and [WatchStalls] measures
// the test process's, so a test can show which busy windows the machine
// caused ([StallTime]).
package fleettest
