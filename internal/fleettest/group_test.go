package fleettest_test

import (
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
)

func TestConfigs(t *testing.T) {
	base := fleettest.WorkerConfig{URL: "http://x/api", Duration: time.Second, Goroutines: 99}
	groups := []fleettest.Group{{N: 1, Goroutines: 16}, {N: 7, Goroutines: 1, Interval: time.Second}}
	cfgs := fleettest.Configs(base, groups...)
	if n := fleettest.Processes(groups...); len(cfgs) != n || n != 8 {
		t.Fatalf("%d configs, Processes says %d, want 8", len(cfgs), n)
	}
	if c := cfgs[0]; c.Goroutines != 16 || c.Interval != 0 || c.URL != base.URL {
		t.Errorf("busy config %+v", c)
	}
	for i, c := range cfgs[1:] {
		if c.Goroutines != 1 || c.Interval != time.Second || c.Duration != time.Second {
			t.Errorf("idle config %d: %+v", i+1, c)
		}
	}
}
