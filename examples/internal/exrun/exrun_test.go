package exrun

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
)

func TestMeterQuantile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	m := &Meter{}
	if got := m.Quantile(0.5); got != 0 {
		t.Errorf("no waits: p50 %v, want 0", got)
	}
	for i := 1; i <= 100; i++ {
		m.Observe(throttle.Event{Kind: throttle.EventAcquired, Wait: ms(i)})
	}
	m.Observe(throttle.Event{Kind: throttle.EventRetry, Wait: time.Hour}) // not a wait for a slot
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, ms(1)}, {0.5, ms(50)}, {0.99, ms(99)}, {1, ms(100)}} {
		if got := m.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestSummaryString(t *testing.T) {
	s := Summary{Name: "with the throttle", Elapsed: 2 * time.Second, Quota: 100, Requests: 190, Limited: 1, Admitted: 189,
		WaitP50: 300 * time.Millisecond, WaitP99: 705 * time.Millisecond}
	want := "with the throttle: 190 requests, 1 429s, 94.5/s admitted of 100/s quota (94 %), wait p50 300ms p99 705ms"
	if got := s.String(); got != want {
		t.Errorf("String() =\n%q, want\n%q", got, want)
	}
}

// server counts what the test's workers call.
type server struct{ calls atomic.Int64 }

func (s *server) Counts() (int, int, int) { n := int(s.calls.Load()); return n, 0, n }

// TestRunStops checks that Run ends every worker, returns a call's error,
// and prints the summary line whether or not a worker failed.
func TestRunStops(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		fail    error
		wantErr error
	}{{"ok", nil, nil}, {"stop", ErrStop, nil}, {"failed", boom, boom}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &server{}
			var out strings.Builder
			s, err := Run(context.Background(), Phase{Name: "p", Duration: 50 * time.Millisecond, Quota: 1, Workers: 3, Server: srv, Out: &out},
				func(ctx context.Context, _, n int) error {
					srv.calls.Add(1)
					switch {
					case n < 2:
						return nil
					case tc.fail != nil:
						return tc.fail
					}
					<-ctx.Done()
					return ctx.Err()
				})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("err %v, want %v", err, tc.wantErr)
			}
			if !strings.HasSuffix(out.String(), s.String()+"\n") {
				t.Errorf("output %q does not end with the summary %q", out.String(), s.String())
			}
		})
	}
}

func TestRunRejectsBadPhase(t *testing.T) {
	if _, err := Run(context.Background(), Phase{Workers: 0, Duration: time.Second, Quota: 1}, nil); err == nil {
		t.Error("Run accepted no workers")
	}
}
