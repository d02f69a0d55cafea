// Package histogram holds the bucket boundaries the exporters
// (otelthrottle, promthrottle) give their histograms, in seconds, so that
// an OpenTelemetry and a Prometheus dashboard of the same Transport bin
// alike.
package histogram

// Waits bounds the histograms of waits, pauses and leases: from a
// millisecond to two minutes (the longest wait a server may name, see
// throttle.WithMaxRetryAfter).
func Waits() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
}

// StoreCalls bounds the histogram of the Redis calls' durations: from
// 100 µs (a call on the same host) to a second (the bound of a Transport's
// first calls; the default bound of the others is 50 ms).
func StoreCalls() []float64 {
	return []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
}
