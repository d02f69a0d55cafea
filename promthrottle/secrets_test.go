package promthrottle_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/secrettest"
	"github.com/throttlekit/throttle/promthrottle"
)

// TestNoSecrets runs the root's no-secret scenarios (internal/secrettest:
// the local one and the one on a private Redis, between them every event
// kind) through the Collector and checks that no label of what it gathers
// holds the key, the query, the path or a bucket key, and that the rule's
// name is there.
func TestNoSecrets(t *testing.T) {
	c := promthrottle.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	secrettest.RunAll(t, throttle.WithObserver(c))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&sb, mf); err != nil {
			t.Fatal(err)
		}
	}
	secrettest.Check(t, "the Prometheus metrics", sb.String())
	if !strings.Contains(sb.String(), `rule="per-key"`) {
		t.Errorf("the rule's name is missing from the labels:\n%s", sb.String())
	}
}
