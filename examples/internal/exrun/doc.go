// Package exrun runs the phases of the runnable examples: a pool of workers
// calling a provider's SDK for a set time, first without the throttle and
// then with it, a progress line every second while they run, and one
// summary line per phase (requests, 429s, the rate achieved against the
// quota, the p50 and p99 of the waits for a slot).
package exrun
