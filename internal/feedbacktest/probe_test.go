package feedbacktest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttle/internal/redistest"
)

// namespace returns a Redis namespace of the test's own.
func namespace(t *testing.T) string {
	return regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")
}

// bucketKey is the Redis key of the un-partitioned rule named rule under
// namespace ns (see redisStore.key).
func bucketKey(ns, rule string) string { return "throttle:{" + ns + "}:" + rule }

// sample is the cap of a bucket as read from Redis at one time.
type sample struct {
	at      time.Duration // offset from the server's epoch
	adapted bool
	rate    float64 // requests per second in force (the rule's when not adapted)
}

// watchBucket reads the bucket's value from Redis every 100 ms until the
// returned function is called, and returns the samples. It is how a failing
// shared-quota run shows what the fleet's caps did. ruleRate is the
// rule's rate after headroom, reported when the bucket is not adapted.
func watchBucket(t *testing.T, rs *redistest.Server, key string, epoch time.Time, ruleRate float64) func() []sample {
	t.Helper()
	rdb := rs.Client(t)
	done := make(chan struct{})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		samples []sample
	)
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			v, err := rdb.Get(ctx, key).Result()
			now, terr := rdb.Time(ctx).Result()
			cancel()
			if (err != nil && !errors.Is(err, redis.Nil)) || terr != nil {
				continue // a slow Redis costs a sample, nothing else
			}
			s := sample{at: time.Since(epoch), rate: ruleRate}
			if r, ok := adaptedRate(v, now.UnixMicro()); ok {
				s.adapted, s.rate = true, min(r, ruleRate)
			}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}
	})
	var once sync.Once
	stop := func() []sample {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
		mu.Lock()
		defer mu.Unlock()
		return samples
	}
	t.Cleanup(func() { stop() })
	return stop
}

// adaptedRate decodes a bucket value "tat rate0 t0 slope until hold n"
// (see bucket.lua) and returns the cap's rate in force at now (µs), or
// false when the bucket is not capped (a value with a hold and no cap has
// until 0; a cap of rate 0 only counts).
func adaptedRate(v string, now int64) (float64, bool) {
	f := strings.Fields(v)
	if len(f) != 7 {
		return 0, false
	}
	var n [7]float64
	for i, s := range f {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, false
		}
		n[i] = x
	}
	r0, t0, slope, until := n[1], n[2], n[3], n[4]
	if float64(now) >= until || r0 <= 0 {
		return 0, false
	}
	return r0 + slope*(float64(now)-t0)/1e6, true
}

// perSecondRates summarises samples as the mean adapted rate in each whole
// second from start, "-" for seconds without samples.
func perSecondRates(samples []sample, start time.Duration, seconds int) string {
	sum := make([]float64, seconds)
	n := make([]int, seconds)
	for _, s := range samples {
		i := int((s.at - start) / time.Second)
		if s.at < start || i >= seconds {
			continue
		}
		sum[i] += s.rate
		n[i]++
	}
	var b strings.Builder
	b.WriteString("[")
	for i := range seconds {
		if i > 0 {
			b.WriteString(" ")
		}
		if n[i] == 0 {
			b.WriteString("-")
			continue
		}
		fmt.Fprintf(&b, "%.0f", sum[i]/float64(n[i]))
	}
	b.WriteString("]")
	return b.String()
}
