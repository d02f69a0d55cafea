// Package moduletest checks a module's build list for the tests of the
// root module and of the exporters' nested modules: each must require none
// of the modules only another one needs, so that a user pays only for the
// packages they import.
package moduletest

import (
	"os/exec"
	"strings"
	"testing"
)

// The module paths (prefixes) that only one nested module may require.
const (
	OpenTelemetry = "go.opentelemetry.io/"   // otelthrottle
	Prometheus    = "github.com/prometheus/" // promthrottle
)

// Compared are the modules only the benchmark suite (the libraries it
// compares against) and the examples (their embedded Redis and the
// providers' SDKs) require: no module of the library's own may.
var Compared = []string{
	"github.com/alicebob/miniredis",
	"github.com/go-redis/redis_rate",
	"go.uber.org/ratelimit",
	"github.com/go-chi/httprate",
	"github.com/ulule/limiter",
	"github.com/stripe/",
	"github.com/twilio/",
}

// CheckBuildList fails t for every module of the current module's build
// list (go list -m all, run in the test's directory) whose path starts
// with one of banned.
func CheckBuildList(t *testing.T, banned ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	mods := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(mods) < 2 {
		t.Fatalf("go list -m all listed %q: not a module's build list", mods)
	}
	for _, m := range mods {
		for _, b := range banned {
			if strings.HasPrefix(m, b) {
				t.Errorf("the module requires %s", m)
			}
		}
	}
}
