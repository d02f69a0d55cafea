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

// TestNoSecretsObserved runs the no-secret scenarios (internal/secrettest:
// requests carrying an API key in their Authorization header, the rules'
// partition key, their query string and their path, through a local
// Transport and one sharing its buckets in a private Redis, between them
// making every event kind) and checks that every kind was made, and that
// no event and no log line holds the key, nor the rules' bucket keys.
// otelthrottle's and promthrottle's tests, in their own modules, check
// their attributes and labels on the same scenarios.
func TestNoSecretsObserved(t *testing.T) {
	rec := &recorder{}
	logs := &syncBuffer{}
	opts := []throttle.Option{throttle.WithObserver(rec),
		throttle.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))}
	secrettest.Run(t, opts...)
	secrettest.RunRedis(t, opts...)

	kinds := map[throttle.EventKind]bool{}
	var events strings.Builder
	for _, e := range rec.take() {
		kinds[e.Kind] = true
		fmt.Fprintf(&events, "%+v\n", e)
		if e.Kind == throttle.EventModeChange {
			// A change of the Transport's, not of a request.
			if e.Rule != "" || e.Host != "" || e.Method != "" {
				t.Errorf("%v: rule %q, host %q, method %q; want none", e.Kind, e.Rule, e.Host, e.Method)
			}
			continue
		}
		if !slices.Contains(secrettest.Rules, e.Rule) {
			t.Errorf("%v: rule %q is not a rule's name", e.Kind, e.Rule)
		}
		if e.Host != secrettest.Host {
			t.Errorf("%v: host %q", e.Kind, e.Host)
		}
	}
	secrettest.CheckKinds(t, kinds)
	secrettest.Check(t, "the events", events.String())
	secrettest.Check(t, "the logs", logs.String())
	if !strings.Contains(logs.String(), `"rule":"per-key"`) {
		t.Errorf("the rule's name is missing from the logs")
	}
}
