// Package algorithmtest holds the fleet tests of issue 13: for each of the
// five algorithms a rule can choose (throttle.Rule.Algorithm), real worker
// processes sharing the rule's bucket through a private Redis against a
// local server that enforces the same algorithm and quota. It has no code
// outside its tests.
package algorithmtest
