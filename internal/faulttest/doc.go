// Package faulttest runs the multi-process fault tests of the Redis outage
// behaviour (issue 5): a fleet of real worker processes (the fleettest
// harness) shares one bucket through a private redis-server that the test
// kills and restarts mid-run, against a recording server that counts
// arrivals.
//
// The harness's workers know nothing of the outage options; [Options] is
// the [fleettest.OptionsFunc] that applies them, and that makes each worker
// log its mode changes ([throttle.WithOnModeChange]) as JSON lines in a
// file of the test's, read back with [ReadModeLog]. The test binary's
// TestMain hands worker processes to the harness with it:
//
//	func TestMain(m *testing.M) {
//		fleettest.DispatchWorker(faulttest.Options)
//		goleak.VerifyTestMain(m)
//	}
package faulttest
