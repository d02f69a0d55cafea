//go:build !unix

package bench

import "time"

// processCPU is 0 where getrusage is missing: the benchmarks then report no
// client CPU.
func processCPU() time.Duration { return 0 }
