package fleettest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvRaceWorkers, set to 1, makes the workers the test binary itself
// again, re-executed, with the race detector when the test binary has it:
// for hunting a race that only a fleet shows. Without it the workers are
// the fleetworker command, built without the race detector (workerCommand).
const EnvRaceWorkers = "THROTTLE_FLEET_RACE_WORKERS"

// EnvWorkerLog, set to a directory, makes every worker log the Transport's
// events at Info and above (pauses, caps, retries, mode changes,
// rejections; throttle.WithLogger) to worker-<id>.log in it: the order of
// a run's events, which its summary does not keep. Each run overwrites
// the files of the last.
const EnvWorkerLog = "THROTTLE_FLEET_WORKER_LOG"

// EnvWorkerLogLevel, set to "debug" beside EnvWorkerLog, logs every event
// instead (each slot, store call and quota reading: throttle.EventQuota's
// Estimate against the server's Remaining is how a misread count shows).
const EnvWorkerLogLevel = "THROTTLE_FLEET_WORKER_LOG_LEVEL"

// workerPackage is the command that runs a worker (fleetworker/main.go).
const workerPackage = "github.com/throttlekit/throttle/internal/fleettest/fleetworker"

// buildTimeout bounds the worker command's build: the first one of a run
// compiles the library and go-redis without the race detector (about 30 s
// on 2 busy cores); later ones link from the build cache.
const buildTimeout = 5 * time.Minute

// Why the workers are not the race-enabled test binary. A fleet test
// measures what a fleet does at its quota: use within a point or two,
// arrivals per second, the gap between reading headers and not. The race
// detector costs 2-20x the CPU per instrumented access (Go's race
// detector documentation), and a fleet of 8 workers x 16 goroutines,
// their server and Redis on 2 cores then runs CPU-bound, as no user's fleet
// does: the stop CI of 2026-12-02 failed 8x16 sliding-1s steady cells at
// 0.961-0.969 where the same cells passed at 0.978 in the CI before, the
// seconds of the low runs at 188-190 where the rules alone sent 196, and
// the feedback-on runs' round trips at a p99 of 8-19 ms against 2-5 ms on
// a quiet host. The product's code is race-tested where races are found:
// the unit and in-process tests, all under -race, and the parent side of
// every fleet test.

var workerBinary = struct {
	once sync.Once
	path string
	err  error
}{}

// workerCommand returns the command that runs one worker: the fleetworker
// command, built once per test binary, or with EnvRaceWorkers the test
// binary itself (whose TestMain hands it to DispatchWorker).
func workerCommand() (*exec.Cmd, error) {
	if os.Getenv(EnvRaceWorkers) == "1" {
		return exec.Command(os.Args[0]), nil
	}
	workerBinary.once.Do(func() { workerBinary.path, workerBinary.err = buildWorker() })
	if workerBinary.err != nil {
		return nil, workerBinary.err
	}
	return exec.Command(workerBinary.path), nil
}

// buildWorker builds the fleetworker command into a directory of this
// process's, after removing the ones of processes that have ended (their
// binaries would otherwise stay in the temporary directory).
func buildWorker() (string, error) {
	sweepWorkerDirs()
	dir, err := os.MkdirTemp("", workerDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("fleettest: build the worker: %w", err)
	}
	path := filepath.Join(dir, "fleetworker")
	// go test runs with the go command on PATH; without it, say so.
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("fleettest: the worker is built with the go command, not found on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	// -race=false: a GOFLAGS=-race would otherwise build it in again.
	out, err := exec.CommandContext(ctx, goCmd, "build", "-race=false", "-o", path, workerPackage).CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("fleettest: go build %s: %w\n%s", workerPackage, err, out)
	}
	return path, nil
}

// workerDirPrefix begins the name of a worker's directory, followed by the
// building process's pid and a dash.
const workerDirPrefix = "throttle-fleetworker-"

// sweepWorkerDirs removes the worker directories of processes that no
// longer run.
func sweepWorkerDirs() {
	ds, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, d := range ds {
		rest, ok := strings.CutPrefix(d.Name(), workerDirPrefix)
		if !ok || !d.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || processRuns(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(os.TempDir(), d.Name()))
	}
}
