//go:build !race

package algorithmtest

// underRace: see race_on_test.go.
const underRace = false
