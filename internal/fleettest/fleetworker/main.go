// Command fleetworker is the worker process of package fleettest, built
// without the race detector (see fleettest's "Workers"): one worker of a
// fleet, run with its config in FLEETTEST_WORKER, with faulttest's knobs
// (outage mode, Redis timeout, mode log) understood. It is built and run
// by fleettest.Start; it does nothing useful by itself.
package main

import (
	"fmt"
	"os"

	"github.com/throttlekit/throttle/internal/faulttest"
	"github.com/throttlekit/throttle/internal/fleettest"
)

func main() {
	fleettest.DispatchWorker(faulttest.Options)
	fmt.Fprintf(os.Stderr, "fleetworker: %s is not set: fleettest.Start runs this command, not you\n", fleettest.EnvWorker)
	os.Exit(2)
}
