package fleettest

import "time"

// Group is a number of identical worker processes of a fleet: a fleet's
// shape is a list of groups, such as one busy process beside seven nearly
// idle ones ({N: 1, Goroutines: 16}, {N: 7, Goroutines: 1, Interval:
// time.Second}). The zero Group has no process.
type Group struct {
	// N is the number of processes.
	N int
	// Goroutines and Interval are each process's
	// [WorkerConfig.Goroutines] and [WorkerConfig.Interval].
	Goroutines int
	Interval   time.Duration
}

// Configs returns one config per process of groups, in order: base with
// Goroutines and Interval set from the process's group. Pass the result
// to [Start].
func Configs(base WorkerConfig, groups ...Group) []WorkerConfig {
	var cfgs []WorkerConfig
	for _, g := range groups {
		for range g.N {
			cfg := base
			cfg.Goroutines, cfg.Interval = g.Goroutines, g.Interval
			cfgs = append(cfgs, cfg)
		}
	}
	return cfgs
}

// Processes returns the number of processes of groups.
func Processes(groups ...Group) int {
	n := 0
	for _, g := range groups {
		n += g.N
	}
	return n
}
