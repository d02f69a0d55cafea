package throttletest

import (
	"net/http"
	"time"

	"github.com/throttlekit/throttle"
)

// Option configures a simulated provider ([NewServer], [NewHandler]).
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	clock   throttle.Clock
	service time.Duration
	next    http.Handler
	rules   []throttle.Rule
	outside []outsideConfig
	errs    []error
}

type outsideConfig struct {
	perSecond float64
	req       *http.Request
}

// WithClock makes the server tell time by c: every decision, window and
// service time follows it. Give it a [FakeClock] (and the same clock to
// the Transport with [throttle.WithClock]) for tests that never sleep. A
// nil Clock, like no WithClock, means the system clock.
func WithClock(c throttle.Clock) Option {
	return optionFunc(func(cfg *config) {
		if c == nil {
			c = systemClock{}
		}
		cfg.clock = c
	})
}

// WithServiceTime makes every admitted request take d before it is
// answered, holding its concurrency slots (see [throttle.Rule.Concurrency])
// meanwhile, on the server's clock: with a [FakeClock], until the test
// advances it. Refused requests are answered at once, as providers do. If
// d is 0, or without WithServiceTime, requests are answered at once; a
// negative d is an error.
func WithServiceTime(d time.Duration) Option {
	return optionFunc(func(cfg *config) {
		if d < 0 {
			cfg.errs = append(cfg.errs, &throttle.OptionError{Option: "WithServiceTime", Reason: "the service time must not be negative"})
			return
		}
		cfg.service = d
	})
}

// WithHandler makes next answer the admitted requests, after the service
// time, with the profile's headers already set (it may overwrite them).
// Without WithHandler (or with nil), the profile's answer is written: a
// small body in the provider's shape. Concurrency slots are held while next
// runs.
func WithHandler(next http.Handler) Option {
	return optionFunc(func(cfg *config) { cfg.next = next })
}

// WithRules adds rules to the profile's, checked after them: a limit per
// endpoint, a tighter quota for one test. Each is validated as the
// profile's are.
func WithRules(rules ...throttle.Rule) Option {
	return optionFunc(func(cfg *config) { cfg.rules = append(cfg.rules, rules...) })
}

// WithOutsideConsumer simulates traffic from elsewhere spending the same
// quota: perSecond requests a second shaped like r (its method, URL path,
// headers; nil means GET /), evenly spaced on the server's clock from the
// server's start. They never cross the network: the server counts each at
// its own instant, just before it decides the next real request (or
// writes a report), so they are exact under a [FakeClock]. They meet the
// rules r meets, take no concurrency slot (they are not in flight), and
// are reported apart ([Report.Outside]). It may be given more than once.
// A perSecond ≤ 0 is an error.
func WithOutsideConsumer(perSecond float64, r *http.Request) Option {
	return optionFunc(func(cfg *config) {
		if !(perSecond > 0) || perSecond > 1e6 {
			cfg.errs = append(cfg.errs, &throttle.OptionError{Option: "WithOutsideConsumer", Reason: "the rate must be in (0, 1e6] requests per second"})
			return
		}
		if r == nil {
			r, _ = http.NewRequest(http.MethodGet, "/", nil)
		}
		cfg.outside = append(cfg.outside, outsideConfig{perSecond: perSecond, req: r})
	})
}
