package faulttest_test

import "strings"

// knownFailure is a gate of the outage matrix the product does not pass
// yet (issue 11 stays open for it): match selects cells by a part of
// their name, gate names the gate, measured gives the figures of the runs
// that listed it, why what the product lacks (docs/OUTAGES.md's matrix
// section says more). Its gate is still measured, printed and written to
// the table, marked "known"; its failure is logged instead of failing the
// test, so that every other gate of the matrix holds in CI. A listed gate
// that passes is logged as such: take it off the list. Never list a gate
// to make a run green: list what the product cannot do, with the reason.
type knownFailure struct {
	match, gate, measured, why string
}

// knownFailures are the matrix's known failures, in one place.
var knownFailures = []knownFailure{}

// knownFailureOf returns the entry listing gate of cell name, or nil.
func knownFailureOf(name, gate string) *knownFailure {
	for i, k := range knownFailures {
		if k.gate == gate && strings.Contains(name, k.match) {
			return &knownFailures[i]
		}
	}
	return nil
}
