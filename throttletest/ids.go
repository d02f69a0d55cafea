package throttletest

import (
	"fmt"
	"sync/atomic"
)

// idSource numbers the ids a profile gives its answers (Stripe's
// Request-Id, Twilio's message sid): deterministic, unique within one
// profile. Safe for concurrent use.
type idSource struct{ n atomic.Uint64 }

func (s *idSource) next(prefix string) string {
	return fmt.Sprintf("%s%016x", prefix, s.n.Add(1))
}
