package middleware

import "github.com/throttlekit/throttle/internal/localstore"

// BucketKeys returns the keys of the buckets l's local store holds: for
// the test that no raw API key is among them.
func BucketKeys(l *Limiter) []string {
	s, ok := l.store.(*localstore.Store)
	if !ok {
		return nil
	}
	var keys []string
	for k := range s.TATs() {
		keys = append(keys, k)
	}
	return keys
}
