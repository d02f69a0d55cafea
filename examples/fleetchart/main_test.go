package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun draws a short chart and checks that the throttled fleet kept to
// the quota while the workers without it did not, through its Redis's
// outage too, in which the replicas' local buckets still served about
// their share each; and that the chart shades the outage.
func TestRun(t *testing.T) {
	// The outage comes after the replicas' second heartbeat (one a
	// second), which settles their count: before it, a replica's
	// fallback runs at a tenth of the rule (throttle.WithFleetShare).
	cfg := config{quota: 50, workers: 12, replicas: 4, duration: 3500 * time.Millisecond, latency: 10 * time.Millisecond,
		outageFrom: 1500 * time.Millisecond, outageFor: time.Second}
	without, err := measure(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	fl, err := newFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	with, err := measure(cfg, fl)
	if cerr := fl.close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	// After the first second (whose window is partly empty), a burst of a
	// tenth of the quota on top of the rate is all a window may hold.
	for i, v := range with[10:] {
		if v > 1.15*float64(cfg.quota) {
			t.Errorf("throttled: %.0f/s at bin %d, want at most the quota %d/s and its burst", v, i+10, cfg.quota)
		}
	}
	// The second ending with the outage: the replicas' local buckets.
	if v := with[24]; v < 0.5*float64(cfg.quota) {
		t.Errorf("throttled, in the outage: %.0f/s, want at least half the quota %d/s", v, cfg.quota)
	}
	out := filepath.Join(t.TempDir(), "c.svg")
	if err := run(cfg, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(svg), "<svg") || strings.Count(string(svg), "<polyline") != 2 || !strings.Contains(string(svg), `class="outage"`) {
		t.Fatalf("not a chart of two lines and an outage:\n%s", svg)
	}
	peak := 0.0
	for _, v := range without[len(without)/2:] {
		peak = max(peak, v)
	}
	if peak < 2*float64(cfg.quota) {
		t.Errorf("the unthrottled run peaked at %.0f/s, want well above the quota of %d/s", peak, cfg.quota)
	}
}

func TestPerSecond(t *testing.T) {
	start := time.Unix(0, 0)
	var as []time.Time
	for i := range 20 {
		as = append(as, start.Add(time.Duration(i)*100*time.Millisecond)) // 10/s for 2 s
	}
	got := perSecond(as, start, 2*time.Second)
	for i, v := range got {
		if v != 10 {
			t.Errorf("bin %d: %v/s, want 10", i, v)
		}
	}
}
