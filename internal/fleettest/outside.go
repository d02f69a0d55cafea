package fleettest

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// StartOutside starts an outside consumer: a goroutine of this process that
// spends perSecond requests per second of the server's quota without any
// throttling, the way another service sharing the same API key would. Its
// requests carry "X-Fleet-Worker: outside" and are recorded with
// [OutsideWorker]; it ignores the answers, 429s included.
//
// Requests are sent on a fixed schedule (the k-th at start + k/perSecond),
// one at a time; a slow answer delays the next ones, which are then sent at
// once to catch up. The returned stop function ends the consumer and waits
// for it; it is idempotent and also runs on the test's cleanup.
// perSecond ≤ 0 starts nothing.
func (s *Server) StartOutside(t testing.TB, perSecond float64) (stop func()) {
	t.Helper()
	if perSecond <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	wg.Go(func() {
		every := time.Duration(float64(time.Second) / perSecond)
		start := time.Now()
		timer := time.NewTimer(0)
		defer timer.Stop()
		for k := 0; ; k++ {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			s.sendOutside(ctx, client)
			timer.Reset(time.Until(start.Add(time.Duration(k+1) * every)))
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			tr.CloseIdleConnections()
		})
	}
	t.Cleanup(stop)
	return stop
}

func (s *Server) sendOutside(ctx context.Context, client *http.Client) {
	// Not cancelled by stop: a request cancelled on the wire may still
	// reach the server after stop returned, and be recorded then (seen in
	// TestOutsideConsumer under load). stop waits for the one in flight.
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, s.URL+"/outside", nil)
	if err != nil {
		return // cannot happen with a valid URL; the server records nothing
	}
	req.Header.Set(WorkerHeader, "outside")
	resp, err := client.Do(req)
	if err != nil {
		return // the consumer stops or the server closed: nothing to record
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}
