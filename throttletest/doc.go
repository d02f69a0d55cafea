// Package throttletest simulates rate-limited API providers for tests, in
// the manner of net/http/httptest: a server that enforces a provider's
// limits strictly and answers in the provider's own shape (status, headers,
// body), then reports what it saw.
//
//	srv, err := throttletest.NewServer(throttletest.Stripe(throttletest.StripeConfig{}))
//	if err != nil { ... }
//	defer srv.Close()
//	// point a client, or a throttle.Transport with providers.StripePreset,
//	// at srv.URL, run the test, then:
//	rep := srv.Report() // admitted, refused by rule, arrivals per second, most in flight
//
// # Profiles
//
// A [Profile] is a provider: its rules ([throttle.Rule] values, with any
// [throttle.Algorithm], a Concurrency, Key and Cost functions) and its
// Answer. [Stripe], [Twilio], [GitHub], [Shopify] and [OpenAI] follow the
// providers' documented limits and headers, the same that package
// providers' presets and dialects encode, so that a Transport with a
// provider's preset can be tested against its profile; edit a profile's
// rules, or add your own with [WithRules], for anything else.
//
// # Decisions
//
// The server is strict: a request is admitted only if it fits every rule
// it meets at the instant it arrives, and is then counted in all of them;
// nothing queues. Each refusal is counted under the rule that refused it
// ([Report.Refused]). The decisions are package middleware's (a
// [middleware.Limiter], strict at now, in this process), on the same
// algorithms and store as a server of your own, so a fixed window of an
// hour resets on the hour as GitHub's does.
//
// Besides the rules, a server may be given a service time
// ([WithServiceTime]: admitted requests stay in flight that long), an
// outside consumer ([WithOutsideConsumer]: traffic from elsewhere spending
// the same quota), a forced pause ([Handler.Pause]: everything refused, with
// Retry-After, for a while), a handler of your own for admitted requests
// ([WithHandler]) and a clock ([WithClock]).
//
// # Fake time
//
// Give the server and the Transport one [FakeClock] and time moves only
// when the test moves it: an hour of GitHub's window passes in
// milliseconds, deterministically. [FakeClock.WaitTimers] and
// [FakeClock.AdvanceToNext] let a test driver move time exactly when every
// goroutine it runs is asleep.
//
// Use [NewServer] for a loopback server ([Server] embeds its
// *httptest.Server) or [NewHandler] to mount the simulated provider in a
// server of your own. Every exported function is safe for concurrent use
// unless its doc says otherwise.
package throttletest
