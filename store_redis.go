package throttle

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA, falling back to EVAL when Redis answers
// NOSCRIPT (its script cache was flushed, or it restarted), so they never
// need loading up front.
var (
	//go:embed bucket.lua
	bucketLua string

	//go:embed reserve.lua
	reserveLua string
	//go:embed reserve_call.lua
	reserveCallLua string
	reserveSrc     = bucketLua + heartbeatLua + reserveLua + reserveCallLua
	reserveScript  = redis.NewScript(reserveSrc)
	// reserveSHA and reserveSrcArg are boxed once, not per call.
	reserveSHA    any = reserveScript.Hash()
	reserveSrcArg any = reserveSrc

	//go:embed reserve_batch.lua
	reserveBatchLua    string
	reserveBatchSrc        = bucketLua + heartbeatLua + reserveLua + reserveBatchLua
	reserveBatchScript     = redis.NewScript(reserveBatchSrc)
	reserveBatchSHA    any = reserveBatchScript.Hash()
	reserveBatchSrcArg any = reserveBatchSrc

	//go:embed refund.lua
	refundLua    string
	refundScript = redis.NewScript(bucketLua + refundLua)

	//go:embed pause.lua
	pauseLua    string
	pauseScript = redis.NewScript(bucketLua + pauseLua)

	//go:embed limit.lua
	limitLua    string
	limitScript = redis.NewScript(bucketLua + limitLua)

	//go:embed hold.lua
	holdLua    string
	holdScript = redis.NewScript(bucketLua + holdLua)
)

// errRedisReply reports a script reply of an unexpected shape: a Redis (or
// proxy) that does not run our scripts as written. Nothing is booked.
var errRedisReply = errors.New("throttle: unexpected reply from Redis")

// maxSpanMicros bounds every span the scripts add to a time: a rule's
// interval times its burst, a wait, a pause. Times are Unix microseconds
// (about 2^50.6 today) held in Lua doubles, exact below 2^53; with each
// span at most 2^49 µs (17.8 years) no sum the scripts form reaches 2^53.
const maxSpanMicros = 1 << 49

// redisStore keeps buckets in Redis, shared by every Transport using the
// same Redis and namespace. A bucket is one string key holding its TAT in
// Unix microseconds of Redis's clock; the scripts run the same GCRA steps as
// localStore. It is safe for concurrent use (go-redis clients are).
type redisStore struct {
	rdb redis.UniversalClient
	ns  string
	// prefix is "throttle:{ns}:": the start of every key under the
	// namespace's hash tag.
	prefix string
	// tagPerKey puts a partitioned bucket's hash into its hash tag
	// (WithHashTagPerKey); split is set when that can put the buckets of one
	// request in different Cluster slots, so a request may need one call per
	// tag.
	tagPerKey, split bool

	// timeout bounds each Redis call on top of the caller's context; 0
	// means the context alone. (The fallback store bounds the calls of a
	// Transport itself.)
	timeout time.Duration
	// hb, when set (newOutageStore sets it for every Transport), is this
	// replica's heartbeat: once per interval a reserve call also registers
	// the replica and records the count of live replicas.
	hb *heartbeat
	// nowMicros, when set (tests only), is passed to the scripts as now
	// instead of Redis's TIME.
	nowMicros func() int64

	// batch sends reserve.lua calls, those of concurrent requests together.
	batch *scriptBatcher

	keysMu sync.RWMutex
	keys   map[string]string // bucket.key → Redis key, see cachedKey
}

func newRedisStore(st redisSettings) *redisStore {
	_, cluster := st.rdb.(*redis.ClusterClient)
	s := &redisStore{
		rdb:       st.rdb,
		ns:        st.namespace,
		prefix:    "throttle:{" + st.namespace + "}:",
		tagPerKey: st.tagPerKey,
		split:     st.tagPerKey && cluster,
		keys:      make(map[string]string),
	}
	s.batch = &scriptBatcher{rdb: st.rdb, late: s.late}
	return s
}

// lateRefundTimeout bounds the refund of a booking whose caller had left.
const lateRefundTimeout = time.Second

// late takes the reply of a reserve call whose caller gave up after it was
// sent: a slot booked for nobody goes back, as far as refund.lua can (see
// refund). The refund runs on a goroutine of its own, so the pipeline that
// brought the reply does not wait for it.
func (s *redisStore) late(c *scriptCall, reply string, err error) {
	if err != nil {
		return
	}
	n := len(c.bs)
	tats := make([]int64, 3*n)
	r := reservation{buckets: c.bs, prev: tats[:n:n], booked: tats[n : 2*n : 2*n], counts: tats[2*n:]}
	ok, _, _, _, perr := s.parseReserve(reply, c.bs, r.prev, r.booked, r.counts, c.beat)
	if perr != nil || !ok {
		return
	}
	r.ok = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), lateRefundTimeout)
		defer cancel()
		_ = s.refund(ctx, &r) // a failed refund leaves the slot spent: under the limit, never over
	}()
}

// checkRedisRules rejects rules the Redis store cannot run exactly: an
// interval under its one-microsecond resolution, or a bucket spanning more
// than maxSpanMicros.
func checkRedisRules(rules []Rule, headroom float64) error {
	crs, err := compileRules(rules, headroom)
	if err != nil {
		return err
	}
	for _, c := range crs {
		if c.interval < time.Microsecond {
			return &RuleError{Rule: c.Name, Field: "Limit.Rate", Reason: fmt.Sprintf(
				"%d per %v is more than one per microsecond, the resolution of the Redis store", c.Limit.Rate, c.Limit.Period)}
		}
		if micros(c.interval) > maxSpanMicros/c.burst {
			return &RuleError{Rule: c.Name, Field: "Limit.Period", Reason: fmt.Sprintf(
				"a bucket of %d × %v spans more than the Redis store's %v", c.burst, c.interval, time.Duration(maxSpanMicros)*time.Microsecond)}
		}
	}
	return nil
}

// micros converts d to microseconds, rounding up: an interval is never
// shortened, so the Redis store is never faster than the rule.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond > 0 {
		us++
	}
	return us
}

// spanMicros converts a wait or pause to microseconds within [0,
// maxSpanMicros], rounding up when up is set (a pause is never shortened)
// and down otherwise (a maximum wait is never lengthened).
func spanMicros(d time.Duration, up bool) int64 {
	if d <= 0 {
		return 0
	}
	us := int64(d / time.Microsecond)
	if up && d%time.Microsecond > 0 {
		us++
	}
	return min(us, maxSpanMicros)
}

// key returns the Redis key of bucket b.
func (s *redisStore) key(b *bucket) string {
	if s.tagPerKey {
		if hash, ok := partitionHash(b); ok {
			return "throttle:p:{" + s.ns + ":" + hash + "}:" + b.rule
		}
	}
	return s.prefix + b.key
}

// keyCacheSize bounds the key cache; it is emptied when full. Hot buckets
// come back at once, and a cold one costs one string concatenation.
const keyCacheSize = 4096

// cachedKey returns key(b), remembering it: building a key costs an
// allocation on every request otherwise.
func (s *redisStore) cachedKey(b *bucket) string {
	s.keysMu.RLock()
	k, ok := s.keys[b.key]
	s.keysMu.RUnlock()
	if ok {
		return k
	}
	k = s.key(b)
	s.keysMu.Lock()
	if len(s.keys) >= keyCacheSize {
		clear(s.keys)
	}
	s.keys[b.key] = k
	s.keysMu.Unlock()
	return k
}

// partitionHash returns the hashed partition key of b, if its rule has a
// Key: bucket keys are the rule's name, then ':' and the hash
// (compiledRule.bucketKey).
func partitionHash(b *bucket) (string, bool) {
	hash, ok := strings.CutPrefix(b.key, b.rule)
	if !ok || len(hash) < 2 || hash[0] != ':' {
		return "", false
	}
	return hash[1:], true
}

// anyTagged reports whether a bucket of bs has a hash tag of its own, not
// the namespace's.
func (s *redisStore) anyTagged(bs []bucket) bool {
	for i := range bs {
		if s.tag(&bs[i]) != "" {
			return true
		}
	}
	return false
}

// tag returns the hash tag of bucket b's key: buckets with equal tags live
// in the same Cluster slot.
func (s *redisStore) tag(b *bucket) string {
	if s.tagPerKey {
		if hash, ok := partitionHash(b); ok {
			return hash
		}
	}
	return ""
}

// call derives the context of one Redis call.
func (s *redisStore) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// nowArg is the scripts' now argument: "" makes them read Redis's TIME.
func (s *redisStore) nowArg() any {
	if s.nowMicros == nil {
		return ""
	}
	return s.nowMicros()
}

func (s *redisStore) reserve(ctx context.Context, bs []bucket, maxWait time.Duration) (reservation, error) {
	if len(bs) == 0 {
		return reservation{ok: true}, nil
	}
	beat := s.hb != nil && s.hb.due()
	if s.split {
		if beat && s.anyTagged(bs) {
			// On a Cluster the replica set lives in the namespace's slot,
			// which a partitioned bucket's key may not: the beat goes on
			// its own, once per interval.
			cctx, cancel := s.call(ctx)
			_, err := s.hb.beat(cctx, s.rdb, s.nowArg())
			cancel()
			if err != nil {
				return reservation{}, err
			}
			beat = false
		}
		if groups := s.groups(bs); len(groups) > 1 {
			return s.reserveSplit(ctx, bs, groups, maxWait)
		}
	}
	n := len(bs)
	tats := make([]int64, 3*n)
	r := reservation{buckets: bs, prev: tats[:n:n], booked: tats[n : 2*n : 2*n], counts: tats[2*n:]}
	ok, wait, limiter, held, err := s.reserveGroup(ctx, bs, 0, spanMicros(maxWait, false), r.prev, r.booked, r.counts, beat)
	if err != nil {
		return reservation{}, err
	}
	r.ok, r.wait, r.limiter = ok, time.Duration(wait)*time.Microsecond, limiter
	r.held = time.Duration(held) * time.Microsecond
	if !ok {
		r.prev, r.booked, r.counts = nil, nil, nil
	}
	return r, nil
}

// reserveGroup runs reserve.lua for buckets bs. When booked it fills prev
// and booked with the buckets' TATs, and counts with their counts (see
// reservation.counts). limiter indexes bs. With beat set
// (the caller won s.hb.due, and bs share the replica set's hash tag) the
// call also carries this replica's heartbeat and records the live count.
//
// It is the hot path, trimmed for allocations: instead of Script.Run (which
// copies the keys into a new argument list and boxes each key and the
// digest) it hands the batcher (batch.go) an EVALSHA with a pooled argument
// list whose numbers and keys go by pointer (go-redis writes *int64 and
// *string without boxing); the batcher sends it alone or in one pipeline
// with concurrent calls, and falls back to EVAL on NOSCRIPT as Script.Run
// does.
func (s *redisStore) reserveGroup(ctx context.Context, bs []bucket, floor, maxWait int64, prev, booked, counts []int64, beat bool) (ok bool, wait int64, limiter int, held int64, err error) {
	nk, nn := len(bs), 3+5*len(bs)
	if beat {
		// The replica set; room for the id and the TTL in the
		// arguments (nums[nn-2] stays unused: the id goes by pointer).
		nk, nn = nk+1, nn+2
	}
	c := getScriptCall(nk, nn)
	c.args = append(c.args, "evalsha", reserveSHA, nk)
	for i := range bs {
		c.keys[i] = s.cachedKey(&bs[i])
		c.args = append(c.args, &c.keys[i])
	}
	if beat {
		c.keys[len(bs)] = s.hb.key
		c.args = append(c.args, &c.keys[len(bs)])
	}
	if s.nowMicros == nil {
		c.args = append(c.args, "")
	} else {
		c.nums[0] = s.nowMicros()
		c.args = append(c.args, &c.nums[0])
	}
	c.nums[1], c.nums[2] = maxWait, floor
	c.args = append(c.args, &c.nums[1], &c.nums[2])
	for i := range bs {
		j := 3 + 5*i
		c.nums[j], c.nums[j+1], c.nums[j+2] = micros(bs[i].interval), bs[i].burst, bs[i].cost
		c.nums[j+3], c.nums[j+4] = spanMicros(bs[i].lateness, false), bs[i].sent
		c.args = append(c.args, &c.nums[j], &c.nums[j+1], &c.nums[j+2], &c.nums[j+3], &c.nums[j+4])
	}
	if beat {
		_, c.nums[nn-1] = s.hb.args()
		c.args = append(c.args, &s.hb.id, &c.nums[nn-1])
	}
	c.nk, c.bs, c.beat = nk, bs, beat
	if s.tagPerKey {
		// On a Cluster bs share one tag (see groups), and a call with the
		// beat has none; on one node the tag only groups calls, which any
		// grouping keeps correct.
		c.tag = s.tag(&bs[0])
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	c.deadline, _ = cctx.Deadline()
	reply, err := s.batch.do(cctx, c) // c is the batcher's from here on
	if err != nil {
		return false, 0, 0, 0, fmt.Errorf("throttle: redis reserve: %w", err)
	}
	return s.parseReserve(reply, bs, prev, booked, counts, beat)
}

// parseReserve parses reserve.lua's reply for buckets bs; see reserveGroup.
func (s *redisStore) parseReserve(reply string, bs []bucket, prev, booked, counts []int64, beat bool) (ok bool, wait int64, limiter int, held int64, err error) {
	bad := func(what string) (bool, int64, int, int64, error) {
		return false, 0, 0, 0, fmt.Errorf("%w: reserve returned %.64q%s", errRedisReply, reply, what)
	}
	okFlag, rest, ok1 := nextInt(reply)
	wait, rest, ok2 := nextInt(rest)
	lim, rest, ok3 := nextInt(rest)
	if !ok1 || !ok2 || !ok3 || okFlag < 0 || okFlag > 1 || lim < 0 || lim >= int64(len(bs)) || wait < 0 {
		return bad("")
	}
	if beat {
		live, more, okL := nextInt(rest)
		if !okL || live < 1 {
			return bad(" with a heartbeat")
		}
		s.hb.record(live)
		rest = more
	}
	held, rest, okH := nextInt(rest)
	if !okH {
		return bad("")
	}
	if okFlag == 0 {
		if rest != "" {
			return bad("")
		}
		return false, wait, int(lim), held, nil
	}
	for i := range bs {
		var okP, okB, okN bool
		prev[i], rest, okP = nextInt(rest)
		booked[i], rest, okB = nextInt(rest)
		counts[i], rest, okN = nextInt(rest)
		if !okP || !okB || !okN {
			return bad(fmt.Sprintf(" for %d buckets", len(bs)))
		}
	}
	if rest != "" {
		return bad(fmt.Sprintf(" for %d buckets", len(bs)))
	}
	return true, wait, int(lim), held, nil
}

// nextInt parses the non-negative decimal integer at the start of s,
// followed by a space or the end, and returns the rest after the space. It
// allocates nothing, unlike strings.Fields and strconv on substrings of a
// converted reply.
func nextInt(s string) (n int64, rest string, ok bool) {
	i := 0
	for ; i < len(s) && s[i] != ' '; i++ {
		d := s[i] - '0'
		if d > 9 || n > (math.MaxInt64-int64(d))/10 {
			return 0, "", false
		}
		n = n*10 + int64(d)
	}
	if i == 0 {
		return 0, "", false
	}
	if i < len(s) {
		i++ // the space
		if i == len(s) {
			return 0, "", false
		}
	}
	return n, s[i:], true
}

func (s *redisStore) refund(ctx context.Context, r *reservation) error {
	if !r.ok || len(r.buckets) == 0 {
		return nil
	}
	if s.split {
		if groups := s.groups(r.buckets); len(groups) > 1 {
			var errs []error
			for _, g := range groups {
				errs = append(errs, s.refundGroup(ctx, r, g))
			}
			return errors.Join(errs...)
		}
	}
	return s.refundGroup(ctx, r, nil)
}

// refundGroup runs refund.lua for the buckets of r at indices idx, or all of
// them when idx is nil.
func (s *redisStore) refundGroup(ctx context.Context, r *reservation, idx []int) error {
	n := len(r.buckets)
	if idx != nil {
		n = len(idx)
	}
	keys := make([]string, 0, n)
	args := make([]any, 1, 1+2*n)
	args[0] = s.nowArg()
	for j := range n {
		i := j
		if idx != nil {
			i = idx[j]
		}
		if r.booked[i] == 0 {
			continue // deferred: nothing was booked
		}
		keys = append(keys, s.key(&r.buckets[i]))
		args = append(args, r.prev[i], r.booked[i])
	}
	if len(keys) == 0 {
		return nil
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	if err := refundScript.Run(cctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("throttle: redis refund: %w", err)
	}
	return nil
}

func (s *redisStore) pause(ctx context.Context, bs []bucket, d time.Duration) error {
	var errs []error
	for _, idx := range s.groupsOrAll(bs) {
		errs = append(errs, s.runOnBuckets(ctx, pauseScript, "pause", bs, idx, s.nowArg(), spanMicros(d, true)))
	}
	return errors.Join(errs...)
}

func (s *redisStore) limit(ctx context.Context, b bucket, c capSpec) error {
	cctx, cancel := s.call(ctx)
	defer cancel()
	span := max(spanMicros(c.span, true), 1)
	if err := limitScript.Run(cctx, s.rdb, []string{s.key(&b)}, s.nowArg(), c.rate, c.slope, span).Err(); err != nil {
		return fmt.Errorf("throttle: redis limit: %w", err)
	}
	return nil
}

func (s *redisStore) held(ctx context.Context, bs []bucket) (time.Duration, error) {
	var held int64
	for _, idx := range s.groupsOrAll(bs) {
		n := len(bs)
		if idx != nil {
			n = len(idx)
		}
		keys := make([]string, 0, n)
		for j := range n {
			i := j
			if idx != nil {
				i = idx[j]
			}
			keys = append(keys, s.key(&bs[i]))
		}
		cctx, cancel := s.call(ctx)
		h, err := holdScript.Run(cctx, s.rdb, keys, s.nowArg()).Int64()
		cancel()
		if err != nil {
			return 0, fmt.Errorf("throttle: redis hold: %w", err)
		}
		held = max(held, h)
	}
	return time.Duration(held) * time.Microsecond, nil
}

// groupsOrAll returns the tag groups of bs when they may be split, or one
// nil group meaning all of them; none when bs is empty.
func (s *redisStore) groupsOrAll(bs []bucket) [][]int {
	if len(bs) == 0 {
		return nil
	}
	if s.split {
		if groups := s.groups(bs); len(groups) > 1 {
			return groups
		}
	}
	return [][]int{nil}
}

// runOnBuckets runs script (pause.lua) on the buckets of bs at
// indices idx, or all of them when idx is nil: ARGV is head, then each
// bucket's interval in µs and burst.
func (s *redisStore) runOnBuckets(ctx context.Context, script *redis.Script, what string, bs []bucket, idx []int, head ...any) error {
	n := len(bs)
	if idx != nil {
		n = len(idx)
	}
	keys := make([]string, 0, n)
	args := make([]any, 0, len(head)+2*n)
	args = append(args, head...)
	for j := range n {
		i := j
		if idx != nil {
			i = idx[j]
		}
		keys = append(keys, s.key(&bs[i]))
		args = append(args, micros(bs[i].interval), bs[i].burst)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	if err := script.Run(cctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("throttle: redis %s: %w", what, err)
	}
	return nil
}

// groups returns the indices of bs grouped by hash tag, in order of first
// appearance: each group can be booked by one script call on a Cluster.
func (s *redisStore) groups(bs []bucket) [][]int {
	var groups [][]int
	var tags []string
outer:
	for i := range bs {
		t := s.tag(&bs[i])
		for g, gt := range tags {
			if gt == t {
				groups[g] = append(groups[g], i)
				continue outer
			}
		}
		tags = append(tags, t)
		groups = append(groups, []int{i})
	}
	return groups
}

// reserveSplit books a request whose buckets live under several hash tags
// (WithHashTagPerKey on a Cluster), one reserve.lua call per tag group, in
// two rounds: the first only asks each group for its wait, so that the
// second can book every group against the request's departure (the
// latest), deferring the buckets whose slot comes too long before it, as
// one call would. All or nothing holds as far as separate calls allow: when
// a group cannot be booked within maxWait, or a call fails, the groups
// booked so far are refunded. A refund only restores a bucket whose slot is
// still its last one booked (see refund.lua); otherwise that slot stays
// spent: the fleet runs under the limit, never over. The calls are not
// isolated: between them, other requests may book, so a group may find a
// later departure in the second round than in the first; the request then
// departs at that later time.
func (s *redisStore) reserveSplit(ctx context.Context, bs []bucket, groups [][]int, maxWait time.Duration) (reservation, error) {
	n := len(bs)
	tats := make([]int64, 3*n)
	r := reservation{buckets: bs, prev: tats[:n:n], booked: tats[n : 2*n : 2*n], counts: tats[2*n:]}
	maxUs := spanMicros(maxWait, false)
	sub := make([][]bucket, len(groups))
	var floor, held int64
	limiter := 0
	for g, idx := range groups {
		sub[g] = make([]bucket, len(idx))
		for j, i := range idx {
			sub[g][j] = bs[i]
		}
		_, wait, lim, h, err := s.reserveGroup(ctx, sub[g], 0, -1, nil, nil, nil, false)
		if err != nil {
			return reservation{}, err
		}
		if wait > floor {
			floor, limiter = wait, idx[lim]
		}
		held = max(held, h)
	}
	r.held = time.Duration(held) * time.Microsecond
	if floor > maxUs {
		return reservation{wait: time.Duration(floor) * time.Microsecond, limiter: limiter, buckets: bs, held: r.held}, nil
	}
	booked := make([]bool, len(groups))
	depart := floor
	for g, idx := range groups {
		m := len(idx)
		gt := make([]int64, 3*m)
		ok, wait, lim, h, err := s.reserveGroup(ctx, sub[g], floor, maxUs, gt[:m], gt[m:2*m], gt[2*m:], false)
		if err != nil {
			s.rollback(ctx, &r, groups, booked)
			return reservation{}, err
		}
		r.held = max(r.held, time.Duration(h)*time.Microsecond)
		if !ok {
			s.rollback(ctx, &r, groups, booked)
			return reservation{wait: time.Duration(wait) * time.Microsecond, limiter: idx[lim], buckets: bs, held: r.held}, nil
		}
		for j, i := range idx {
			r.prev[i], r.booked[i], r.counts[i] = gt[j], gt[m+j], gt[2*m+j]
		}
		booked[g] = true
		if wait > depart {
			depart, limiter = wait, idx[lim]
		}
	}
	r.ok, r.wait, r.limiter = true, time.Duration(depart)*time.Microsecond, limiter
	return r, nil
}

// rollback refunds the groups of r marked booked. It runs even when ctx is
// done: the slots must go back.
func (s *redisStore) rollback(ctx context.Context, r *reservation, groups [][]int, booked []bool) {
	for g, idx := range groups {
		if booked[g] {
			// A failed refund leaves the slot spent: the fleet runs under
			// the limit, never over. The caller reports the first error.
			_ = s.refundGroup(context.WithoutCancel(ctx), r, idx)
		}
	}
}
