//go:build race

package concurrencytest

// underRace is set when the race detector is on: it multiplies the CPU
// time of every hand-off (worker processes are this test binary), so the
// cap matrix's use gates, which time hand-offs of a millisecond, are
// logged rather than enforced under it. Every other gate holds.
const underRace = true
