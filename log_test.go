package throttle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a handler.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// logLines returns the JSON lines of buf, decoded.
func logLines(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLogger(t *testing.T) {
	buf := &syncBuffer{}
	l := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := fakeclock.New(epoch)
	tr := mustNew(t, limitedOnce(http.Header{"Retry-After": {"2"}}), throttle.WithClock(clk), throttle.WithLogger(l),
		throttle.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}}))
	done := make(chan error, 1)
	go func() { done <- roundTrip(tr, newReq(t, context.Background(), "GET", "http://api.example/v1")) }()
	clk.WaitTimers(1)
	clk.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []struct{ level, msg string }{
		{"DEBUG", "throttle: slot acquired"},
		{"WARN", "throttle: response rate limited"},
		{"INFO", "throttle: fleet paused"},
		{"INFO", "throttle: bucket capped by the server's feedback"},
		{"INFO", "throttle: retrying"},
		{"DEBUG", "throttle: slot acquired"},
	}
	lines := logLines(t, buf)
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf)
	}
	for i, w := range want {
		m := lines[i]
		if m["level"] != w.level || m["msg"] != w.msg || m["method"] != "GET" || m["host"] != "api.example" || m["rule"] != "api" {
			t.Errorf("line %d: %v; want level %s, msg %q, method GET, host api.example, rule api", i, m, w.level, w.msg)
		}
	}
	if m := lines[1]; m["status"] != float64(429) || m["retry_after"] != float64(2*time.Second) || m["dialect"] != nil {
		t.Errorf("rate-limited line %v; want status 429, retry_after 2s, no dialect (no dialect read it)", m)
	}
	if m := lines[4]; m["attempt"] != float64(2) || m["delay"] != float64(2*time.Second) {
		t.Errorf("retry line %v; want attempt 2, delay 2s", m)
	}

	t.Run("off below the level", func(t *testing.T) {
		buf := &syncBuffer{}
		l := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		tr := mustNew(t, okBase, throttle.WithLogger(l), throttle.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 1}}))
		if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://api.example/")); err != nil {
			t.Fatal(err)
		}
		if buf.String() != "" {
			t.Errorf("an acquired slot logged at Info: %s", buf)
		}
	})
	t.Run("rejection warns", func(t *testing.T) {
		buf := &syncBuffer{}
		l := slog.New(slog.NewJSONHandler(buf, nil))
		tr, _ := fillBucket(t, okBase, throttle.WithoutWaiting(), throttle.WithLogger(l))
		_ = roundTrip(tr, newReq(t, context.Background(), "DELETE", "http://x/"))
		lines := logLines(t, buf)
		if len(lines) != 1 || lines[0]["level"] != "WARN" || lines[0]["reason"] != "beyond_max_wait" || lines[0]["method"] != "DELETE" || lines[0]["rule"] != "one" {
			t.Errorf("lines %v; want one WARN beyond_max_wait of DELETE, rule one", lines)
		}
	})
	t.Run("nil logger", func(t *testing.T) {
		if _, err := throttle.New(okBase, throttle.WithLogger(nil)); err != nil {
			t.Fatal(err)
		}
	})
}
