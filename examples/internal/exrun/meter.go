package exrun

import (
	"slices"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
)

// Meter is a throttle.Observer that keeps every wait a request had before it
// left: for its rate slot (throttle.EventAcquired, one per attempt) and for
// its lease in a concurrency cap (throttle.EventLeaseAcquired). The zero
// Meter is ready to use; it is safe for concurrent use.
type Meter struct {
	mu    sync.Mutex
	waits []time.Duration
}

var _ throttle.Observer = (*Meter)(nil)

// Observe keeps the wait of an acquired slot or lease.
func (m *Meter) Observe(e throttle.Event) {
	if e.Kind != throttle.EventAcquired && e.Kind != throttle.EventLeaseAcquired {
		return
	}
	m.mu.Lock()
	m.waits = append(m.waits, e.Wait)
	m.mu.Unlock()
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the waits kept so far, by
// the nearest rank; 0 when none was (a run without the throttle waits for
// nothing).
func (m *Meter) Quantile(q float64) time.Duration {
	m.mu.Lock()
	w := slices.Clone(m.waits)
	m.mu.Unlock()
	if len(w) == 0 {
		return 0
	}
	slices.Sort(w)
	i := int(q*float64(len(w)) + 0.5)
	return w[min(max(i-1, 0), len(w)-1)]
}
