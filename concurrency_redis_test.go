package throttle_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestConcurrencySharedThroughRedis: three Transports (three replicas) on
// one namespace share a cap of 2 in Redis, with a rate beside it on a
// second rule, and a request that needs both rules; never more than 2
// requests are in service at once, none is rejected, and Close leaves no
// goroutine behind (goleak checks at the end of the package's tests).
func TestConcurrencySharedThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	api := &inFlightServer{limit: 2, service: 10 * time.Millisecond}
	hs := httptest.NewServer(api)
	defer hs.Close()
	ns := strings.ReplaceAll(t.Name(), "/", "-")
	rules := []throttle.Rule{
		{Name: "cap", Concurrency: 2},
		{Name: "rate", Limit: throttle.Limit{Rate: 1000, Period: time.Second, Burst: 10}},
	}
	var wg sync.WaitGroup
	for range 3 {
		tr := mustNew(t, nil, throttle.WithRedis(rdb), throttle.WithRedisTimeout(20*time.Second), throttle.WithNamespace(ns), throttle.WithRules(rules...),
			throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: 1}))
		t.Cleanup(func() {
			tr.CloseIdleConnections()
			if err := tr.Close(); err != nil {
				t.Error(err)
			}
		})
		client := &http.Client{Transport: tr}
		for range 4 {
			wg.Go(func() {
				for range 5 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL, nil)
					resp, err := client.Do(req)
					if err != nil {
						cancel()
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					cancel()
				}
			})
		}
	}
	wg.Wait()
	if r := api.rejected.Load(); r != 0 {
		t.Errorf("%d requests rejected, want 0", r)
	}
	if top := api.top.Load(); top > 2 {
		t.Errorf("%d in service at once, cap 2", top)
	}
	if n := api.served.Load(); n != 60 {
		t.Errorf("served %d, want 60", n)
	}
}
