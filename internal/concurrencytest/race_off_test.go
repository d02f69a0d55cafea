//go:build !race

package concurrencytest

// underRace: see race_on_test.go.
const underRace = false
