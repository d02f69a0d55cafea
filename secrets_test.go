package throttle_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/secrettest"
)

// TestNoSecretsObserved runs the no-secret scenario (internal/secrettest:
// requests carrying an API key in their Authorization header, the rules'
// partition key, their query string and their path, through every event
// kind a local Transport makes) and checks that no event and no log line
// holds the key, nor the rules' bucket keys. otelthrottle's and
// promthrottle's tests, in their own modules, check their attributes and
// labels on the same scenario.
func TestNoSecretsObserved(t *testing.T) {
	rec := &recorder{}
	logs := &syncBuffer{}
	secrettest.Run(t, throttle.WithObserver(rec),
		throttle.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))

	kinds := map[throttle.EventKind]bool{}
	var events strings.Builder
	for _, e := range rec.take() {
		kinds[e.Kind] = true
		fmt.Fprintf(&events, "%+v\n", e)
		if !slices.Contains(secrettest.Rules, e.Rule) {
			t.Errorf("%v: rule %q is not a rule's name", e.Kind, e.Rule)
		}
		if e.Host != secrettest.Host {
			t.Errorf("%v: host %q", e.Kind, e.Host)
		}
	}
	for _, k := range []throttle.EventKind{throttle.EventAcquired, throttle.EventQueued, throttle.EventDequeued, throttle.EventRejected,
		throttle.EventRateLimited, throttle.EventPaused, throttle.EventCapped, throttle.EventRetry, throttle.EventLeaseAcquired, throttle.EventLeaseReleased} {
		if !kinds[k] {
			t.Errorf("no %v event: the test does not cover it", k)
		}
	}
	secrettest.Check(t, "the events", events.String())
	secrettest.Check(t, "the logs", logs.String())
	if !strings.Contains(logs.String(), `"rule":"per-key"`) {
		t.Errorf("the rule's name is missing from the logs")
	}
}
