package middleware

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/store"
)

// rule is a validated Rule of one tier with its bucket worked out.
type rule struct {
	throttle.Rule
	// prefix names the rule's buckets: the rule's name in the default
	// tier, else the tier's length, the tier and the name, so that no two
	// (tier, rule) pairs share one.
	prefix string
	bucket store.Bucket // Key, Cost and the partition left to fill in
	rated  bool
	// open is set for a rule that applies to every request (a zero Match):
	// the rules Take books.
	open bool
}

// tier is a tier's rules, in order.
type tier struct {
	name  string
	rules []*rule
}

// compileTier validates rules, as the Transport does (the root's
// validation, run through throttle.New), with the middleware's own
// checks, and works out their buckets: no headroom (a server enforces its
// quota as written) and, with Redis, the Redis store's bounds.
func compileTier(name string, rules []throttle.Rule, maxWait time.Duration, redis bool) (*tier, error) {
	opts := []throttle.Option{throttle.WithRules(rules...), throttle.WithHeadroom(0), throttle.WithoutFeedback()}
	t, err := throttle.New(nil, opts...)
	if t != nil {
		_ = t.Close()
	}
	if err != nil {
		return nil, inTier(name, err)
	}
	out := &tier{name: name}
	for _, r := range rules {
		if err := checkName(r.Name); err != nil {
			return nil, inTier(name, &throttle.RuleError{Rule: r.Name, Field: "Name", Reason: err.Error()})
		}
		c := &rule{Rule: r, prefix: r.Name, rated: r.Limit != (throttle.Limit{}), open: zeroMatch(&r.Match)}
		if name != "" {
			c.prefix = fmt.Sprintf("%d/%s/%s", len(name), name, r.Name)
		}
		if c.rated {
			b, err := bucketOf(r, maxWait, redis)
			if err != nil {
				return nil, inTier(name, err)
			}
			b.Rule = c.prefix
			c.bucket = b
		}
		out.rules = append(out.rules, c)
	}
	return out, nil
}

// inTier names the tier of a rule error: a *throttle.RuleError of a rule
// of tier name (not the default tier) comes back with Rule "name/rule",
// since tiers may reuse rule names.
func inTier(name string, err error) error {
	var re *throttle.RuleError
	if name == "" || !errors.As(err, &re) {
		return err
	}
	return &throttle.RuleError{Rule: name + "/" + re.Rule, Field: re.Field, Reason: re.Reason}
}

// checkName rejects a rule name the RateLimit fields cannot carry: a
// structured field String holds printable ASCII only.
func checkName(name string) error {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("must be printable ASCII for the RateLimit headers, has %q at byte %d", c, i)
		}
	}
	return nil
}

// bucketOf returns the bucket of a validated rated rule. A leaky or token
// bucket's lateness covers the longest wait, so that no bucket of a
// request is ever deferred: the middleware books every bucket at once.
func bucketOf(r throttle.Rule, maxWait time.Duration, redis bool) (store.Bucket, error) {
	l := r.Limit
	iv := time.Duration(float64(l.Period) / float64(l.Rate))
	b := store.Bucket{
		Interval: iv,
		Burst:    int64(l.Burst),
		Lateness: max(l.Period, maxWait, iv),
		Rate:     int64(l.Rate),
		Period:   l.Period,
	}
	switch r.Algorithm {
	case throttle.TokenBucket:
		b.Algorithm = store.TokenBucket
	case throttle.FixedWindow:
		b.Algorithm, b.Burst = store.FixedWindow, int64(l.Rate)
	case throttle.SlidingLog:
		b.Algorithm, b.Burst = store.SlidingLog, int64(l.Rate)
	case throttle.SlidingCounter:
		b.Algorithm, b.Burst = store.SlidingCounter, int64(l.Rate)
	}
	if redis {
		switch {
		case iv < time.Microsecond:
			return b, &throttle.RuleError{Rule: r.Name, Field: "Limit.Rate", Reason: fmt.Sprintf(
				"%d per %v is more than one per microsecond, the resolution of the Redis store", l.Rate, l.Period)}
		case redisstore.Micros(iv) > redisstore.MaxSpanMicros/b.Burst:
			return b, &throttle.RuleError{Rule: r.Name, Field: "Limit.Period", Reason: fmt.Sprintf(
				"a bucket of %d × %v spans more than the Redis store's %v", b.Burst, iv, time.Duration(redisstore.MaxSpanMicros)*time.Microsecond)}
		}
	}
	return b, nil
}

func zeroMatch(m *throttle.Match) bool {
	return m.Host == "" && len(m.Methods) == 0 && m.PathPrefix == "" && m.Path == "" && m.Func == nil
}

// bucketKey returns the key of the bucket of partition key k (hashed: a
// raw key is never stored), or the rule's one bucket without a Key.
func (c *rule) bucketKey(k string, keyed bool) string {
	if !keyed {
		return c.prefix
	}
	// 128 bits of SHA-256, hex encoded, as the Transport's keys are; built
	// in one allocation.
	sum := sha256.Sum256([]byte(k))
	b := make([]byte, 0, len(c.prefix)+1+32)
	b = append(b, c.prefix...)
	b = append(b, ':')
	b = hex.AppendEncode(b, sum[:16])
	return string(b)
}
