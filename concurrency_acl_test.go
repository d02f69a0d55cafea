package throttle_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/redistest"
)

// leaseACL is the ACL line docs/REDIS.md and the README give for a fleet
// with rate rules and concurrency caps: the rate scripts' commands, the
// lease scripts' and the pub/sub commands, on throttle keys and channels.
const leaseACL = "user throttle on >fleet-password resetkeys ~throttle:* resetchannels &throttle:* -@all " +
	"+evalsha +eval +get +set +time +pexpire +pttl " +
	"+zadd +zrem +zcard +zcount +zrange +zrangebyscore +zremrangebyscore +zrank +zscore " +
	"+hget +hset +hsetnx +hdel +hmget +hincrby " +
	"+publish +subscribe +unsubscribe +ping"

// TestConcurrencyThroughACLUser runs a cap of 1 shared by two Transports
// as that user: the second request waits for the first's lease and is
// woken by its release (pub/sub), and both take their leases in Redis,
// not from the fallback.
func TestConcurrencyThroughACLUser(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL(leaseACL))
	rdb := srv.ClientAs(t, "throttle", "fleet-password")
	release := make(chan struct{})
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	rule := throttle.Rule{Name: "cap", Concurrency: 1}
	var trs [2]*throttle.Transport
	for i := range trs {
		trs[i] = mustNew(t, base, throttle.WithRedis(rdb), throttle.WithRedisTimeout(20*time.Second), throttle.WithNamespace("acl"), throttle.WithRules(rule))
		t.Cleanup(func() { _ = trs[i].Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := trs[0].RoundTrip(newReq(t, ctx, "GET", "http://x/"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		resp, err := trs[1].RoundTrip(newReq(t, ctx, "GET", "http://x/"))
		if err == nil {
			_ = resp.Body.Close()
		}
		got <- err
		close(release)
	}()
	select {
	case err := <-got:
		t.Fatalf("the second request went while the first held the lease (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	_ = first.Body.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second request was not woken by the release")
	}
	<-release
	for i, tr := range trs {
		if m := tr.Mode(); m != throttle.ModeShared {
			t.Errorf("transport %d: mode %v, want shared", i, m)
		}
	}
	n, err := srv.Client(t).Keys(ctx, "throttle:{acl}:lease:*").Result()
	if err != nil || len(n) == 0 {
		t.Errorf("no lease keys in Redis (%v): the leases were not taken there", err)
	}
}
