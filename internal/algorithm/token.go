package algorithm

// This file is the token bucket: Burst tokens, one more every interval, a
// request of cost c takes c tokens and waits for them when they are short
// (tokens may be booked ahead, as golang.org/x/time/rate's reservations
// do). Its state is one number, the instant F at which the bucket is full
// again; at t it holds min(Burst, Burst - (F-t)/interval) tokens. A request
// of cost c then departs at
//
//	max(now, F - (Burst-c)·interval)
//
// and booking it at d moves F to max(F, d) + c·interval: the leaky
// bucket's GCRA with F for its TAT (internal/localstore's gcra.go runs
// both). With reservations the two are the same algorithm and make the
// same decisions; they differ in the pause. A pause leaves a leaky bucket
// full but for one slot (a request of cost 1 departs at its end, then the
// rate); it leaves a token bucket with no tokens at its end, so the first
// request departs cost intervals after it.

// TokenPause returns the full instant F of a token bucket held shut until
// until: its tokens are gone at until and refill from there.
func TokenPause(full, until, interval, burst int64) int64 {
	f := until + interval*burst
	if f < until { // saturated
		f = 1<<63 - 1
	}
	return max(full, f)
}
