//go:build race

package algorithmtest

// underRace is set when the race detector is on (see knownUnderRace).
const underRace = true
