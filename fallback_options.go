package throttle

import (
	"time"
)

// Defaults of the outage options (see docs/OUTAGES.md).
const (
	// DefaultRedisTimeout bounds every Redis call of a Transport given
	// [WithRedis]. A Redis on the same network answers a script call in
	// well under a millisecond, so 50 ms is far above a healthy call's
	// latency and still short enough that a request hitting an outage
	// loses little time before it falls back.
	DefaultRedisTimeout = 50 * time.Millisecond

	// DefaultFleetSize is the number of replicas a Transport assumes it
	// shares each rule with, in ModeFallback, until its first heartbeat has
	// counted the live replicas: a replica that starts while Redis is down
	// runs each rule at a tenth of its rate. A tenth is conservative for
	// fleets of up to ten replicas, which is most of them; larger fleets
	// should set [WithFleetShare].
	DefaultFleetSize = 10

	// probeEvery is the breaker's half-open probe interval: while Redis is
	// unreachable, one request in this interval tries it. Short enough that
	// the fleet is back on the shared bucket well within 2 s of Redis
	// answering again (a probe can fail on a connection the restart broke,
	// and the next one comes 250 ms later); long enough that a stalled Redis
	// costs only one request in this interval its timeout.
	probeEvery = 250 * time.Millisecond
)

// outageSettings is what the outage options set.
type outageSettings struct {
	timeout  time.Duration
	mode     Mode
	share    float64 // explicit share of each rule in ModeFallback; 0 means counted
	onChange func(ModeChange)
}

func defaultOutageSettings() outageSettings {
	return outageSettings{timeout: DefaultRedisTimeout, mode: ModeFallback}
}

// newFallbackStore wraps primary (the Redis store) with the outage
// behaviour set by os. fleet returns the live replicas counted by the
// heartbeat (0 before the first); guard says whether each Redis call needs a
// goroutine to keep its timeout (the client ignores context deadlines).
func newFallbackStore(primary store, os outageSettings, c Clock, fleet func() int64, guard bool) *fallbackStore {
	n := &notifier{fn: os.onChange}
	return &fallbackStore{
		primary: primary,
		clock:   c,
		timeout: os.timeout,
		guard:   guard,
		outage:  os.mode,
		brk:     newBreaker(probeEvery, os.mode, n),
		local:   newLocalBuckets(c.Now()),
		fleet:   fleet,
		share:   os.share,
		assumed: DefaultFleetSize,
	}
}
