package otelthrottle_test

import (
	"testing"

	"github.com/throttlekit/throttle/internal/moduletest"
)

// TestModuleRequirements checks that this module's build list holds none
// of the modules only others need: Prometheus, which the other exporter's
// module requires, nor what the benchmarks and the examples use. A user of
// the OpenTelemetry exporter pays for it alone.
func TestModuleRequirements(t *testing.T) {
	moduletest.CheckBuildList(t, append(moduletest.Compared, moduletest.Prometheus)...)
}
