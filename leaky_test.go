package throttle

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

// t0 is an arbitrary Unix-nanosecond instant (late 2023) at which the fake
// clocks of the store and transport tests start, so that offsets stay
// readable.
const t0 = int64(1_700_000_000_000_000_000)

// epoch is where fake clocks start in the store and transport tests.
var epoch = time.Unix(0, t0)

// TestLocalStoreOneBucket runs sequences of requests through one bucket of
// the local store: bursts, waits, rejections that book nothing, costs, a
// clock going backwards and saturated arithmetic.
func TestLocalStoreOneBucket(t *testing.T) {
	now := time.Unix(0, t0)
	ms := time.Millisecond
	type call struct {
		at      time.Duration // offset from now
		n       int
		maxWait time.Duration
		want    time.Duration
		ok      bool
	}
	tests := []struct {
		name  string
		limit Limit
		calls []call
	}{
		{
			name:  "burst then one per interval",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 3},
			calls: []call{
				{0, 1, 0, 0, true}, {0, 1, 0, 0, true}, {0, 1, 0, 0, true},
				{0, 1, time.Second, 100 * ms, true}, {0, 1, time.Second, 200 * ms, true},
				{250 * ms, 1, time.Second, 50 * ms, true},
			},
		},
		{
			name:  "maxWait rejection books nothing",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 1},
			calls: []call{
				{0, 1, 0, 0, true},
				{0, 1, 99 * ms, 100 * ms, false}, {0, 1, 0, 100 * ms, false},
				{0, 1, 100 * ms, 100 * ms, true}, // the same slot: nothing was booked
				{0, 1, 0, 200 * ms, false},
			},
		},
		{
			name:  "cost > 1",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 5},
			calls: []call{{0, 5, 0, 0, true}, {0, 2, time.Second, 200 * ms, true}, {0, 1, time.Second, 300 * ms, true}},
		},
		{
			name:  "clock going backwards waits longer, never less",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 1},
			calls: []call{{0, 1, 0, 0, true}, {-time.Hour, 1, 2 * time.Hour, time.Hour + 100*ms, true}},
		},
		{
			name:  "huge period: the second request never fits",
			limit: Limit{Rate: 1, Period: math.MaxInt64, Burst: 1},
			calls: []call{{0, 1, 0, 0, true}, {0, 1, math.MaxInt64, time.Duration(math.MaxInt64 - t0), true}},
		},
		{
			name:  "huge burst and cost",
			limit: Limit{Rate: math.MaxInt, Period: math.MaxInt64, Burst: math.MaxInt / 2},
			calls: []call{{0, math.MaxInt / 2, 0, 0, true}, {0, 1, 0, time.Nanosecond, false}, {time.Nanosecond, 1, 0, 0, true}},
		},
		{
			name:  "burst MaxInt, cost MaxInt goes at once",
			limit: Limit{Rate: math.MaxInt, Period: math.MaxInt64, Burst: math.MaxInt},
			calls: []call{{0, math.MaxInt, 0, 0, true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := compileRules([]Rule{{Name: "bucket", Limit: tt.limit}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			clk := fakeclock.New(now)
			s := newLocalStore(clk)
			for i, c := range tt.calls {
				clk.Set(now.Add(c.at))
				b := store.Bucket{Key: "bucket", Rule: "bucket", Interval: rules[0].interval, Burst: rules[0].burst, Cost: int64(c.n)}
				r, err := s.Reserve(context.Background(), []store.Bucket{b}, c.maxWait)
				if err != nil {
					t.Fatal(err)
				}
				wait, ok := r.Wait, r.OK
				if wait != c.want || ok != c.ok {
					t.Fatalf("call %d %+v: Reserve = %v, %v; want %v, %v", i, c, wait, ok, c.want, c.ok)
				}
				if wait < 0 {
					t.Fatalf("call %d: negative wait %v", i, wait)
				}
			}
		})
	}
}
