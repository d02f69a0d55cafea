package exrun

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/throttlekit/throttle/throttletest"
)

// Simulated is the Server of a phase against a throttletest server: its
// Report's arrivals, refusals (for any rule: a 429, or a message Twilio's
// profile queued over its sender's rate) and admissions.
type Simulated struct {
	S *throttletest.Server
}

// Counts returns what the simulated provider saw so far.
func (s Simulated) Counts() (arrived, limited, admitted int) {
	r := s.S.Report()
	return r.Arrived, r.RefusedTotal(), r.Admitted
}

// RefusedBy returns the refusals by the rule (or pause) that made them, as
// "stripe-global 2, stripe-endpoint 1", or "" when there were none.
func (s Simulated) RefusedBy() string {
	r := s.S.Report()
	var parts []string
	for _, rule := range slices.Sorted(maps.Keys(r.Refused)) {
		if n := r.Refused[rule]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", rule, n))
		}
	}
	return strings.Join(parts, ", ")
}
