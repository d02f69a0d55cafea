package bench

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/store"
)

// The local-decision benchmarks compare the local store's Reserve (the
// in-process GCRA of internal/localstore, as the Transport calls it) with
// golang.org/x/time/rate and go.uber.org/ratelimit in the same run, on the
// path that does not wait: every limiter gets a rate of 10⁹ per second
// (one per ns) and, where it has one, a burst of 10⁶, so every call is
// admitted at once. uber's Take sleeps when called faster than its rate;
// at one per ns it never does, so it too measures its decision alone.
// All names start with Local so that -bench Local selects them.

const (
	benchRate  = 1_000_000_000 // per second: one per ns
	benchBurst = 1_000_000
)

// serialAndParallel runs f as sub-benchmarks "serial" and "parallel". f
// reports whether the call was admitted at once; the share of calls that
// were not is reported as denied/op. It should be 0, but under -parallel a
// goroutine preempted between reading the clock and taking the limiter's
// lock arrives with a stale now, and may be told to wait on a loaded machine.
func serialAndParallel(b *testing.B, name string, f func() bool) {
	b.Run(name+"/serial", func(b *testing.B) {
		b.ReportAllocs()
		denied := 0
		for b.Loop() {
			if !f() {
				denied++
			}
		}
		b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		b.ReportAllocs()
		var denied atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			n := int64(0)
			for pb.Next() {
				if !f() {
					n++
				}
			}
			denied.Add(n)
		})
		b.ReportMetric(float64(denied.Load())/float64(b.N), "denied/op")
	})
}

// newBenchStore returns a local store on the system clock and the bucket
// of one rule of benchRate per second, burst benchBurst, as the root
// compiles it with no headroom: an interval of one second / benchRate, a
// burst of benchBurst.
func newBenchStore() (*localstore.Store, []store.Bucket) {
	bs := []store.Bucket{{Key: "bench", Rule: "bench", Interval: time.Second / benchRate, Burst: benchBurst, Cost: 1}}
	return localstore.New(systemClock{}), bs
}

// benchReserve books one slot in the local store without waiting, as the
// Transport's acquire does, and reports whether it went at once.
func benchReserve(s *localstore.Store, bs []store.Bucket) func() bool {
	ctx := context.Background()
	return func() bool {
		r, err := s.Reserve(ctx, bs, 0)
		return err == nil && r.OK && r.Wait == 0
	}
}

func BenchmarkLocalAllow(b *testing.B) {
	s, bs := newBenchStore()
	serialAndParallel(b, "localStore.Reserve", benchReserve(s, bs))
	rl := rate.NewLimiter(benchRate, benchBurst)
	serialAndParallel(b, "rate.Limiter.Allow", rl.Allow)
}

func BenchmarkLocalReserve(b *testing.B) {
	s, bs := newBenchStore()
	serialAndParallel(b, "localStore.Reserve", benchReserve(s, bs))
	rl := rate.NewLimiter(benchRate, benchBurst)
	serialAndParallel(b, "rate.Limiter.Reserve", func() bool {
		r := rl.Reserve()
		return r.OK() && r.Delay() == 0
	})
}

func BenchmarkLocalTake(b *testing.B) {
	rl := ratelimit.New(benchRate)
	serialAndParallel(b, "ratelimit.Take", func() bool { rl.Take(); return true })
}

// BenchmarkLocalTransport measures the Transport's acquire path with the
// local store: one rule that never makes a request wait, and a base that
// returns a prepared ordinary response (a Content-Type header, no rate-limit
// headers), so that the response path reads headers as it would in use.
// "base" is that base alone: the Transport's overhead is RoundTrip's figure
// less base's (internal/benchtable subtracts it). The request is reused, as
// RoundTrip keeps nothing of it.
func BenchmarkLocalTransport(b *testing.B) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: http.NoBody}
	base := rtFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	req := newReq(b, context.Background(), "GET", "http://api.example/v1", "X-Api-Key", "sk_bench")
	serialAndParallel(b, "base", func() bool {
		_, err := base.RoundTrip(req)
		return err == nil
	})
	for _, tc := range []struct {
		name string
		key  func(*http.Request) string
	}{{"RoundTrip", nil}, {"RoundTrip.keyed", throttle.KeyHeader("X-Api-Key")}} {
		tr := mustNew(b, base, throttle.WithRules(throttle.Rule{
			Name:  "bench",
			Limit: throttle.Limit{Rate: benchRate, Period: time.Second, Burst: benchBurst},
			Key:   tc.key,
		}))
		serialAndParallel(b, tc.name, func() bool {
			_, err := tr.RoundTrip(req)
			return err == nil
		})
	}
}
