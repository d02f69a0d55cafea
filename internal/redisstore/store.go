package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/store"
)

// Clock tells the time: the heartbeat's clock. The root's Clock satisfies
// it.
type Clock interface {
	Now() time.Time
}

// The scripts run with EVALSHA, falling back to EVAL when Redis answers
// NOSCRIPT (its script cache was flushed, or it restarted), so they never
// need loading up front.
var (
	//go:embed bucket.lua
	bucketLua string
	//go:embed window.lua
	windowLua string
	// headLua is what every script that touches a bucket starts with.
	headLua = bucketLua + windowLua

	//go:embed reserve.lua
	reserveLua string
	//go:embed reserve_call.lua
	reserveCallLua string
	reserveSrc     = headLua + heartbeatLua + reserveLua + reserveCallLua
	reserveScript  = redis.NewScript(reserveSrc)
	// reserveSHA and reserveSrcArg are boxed once, not per call.
	reserveSHA    any = reserveScript.Hash()
	reserveSrcArg any = reserveSrc

	//go:embed reserve_batch.lua
	reserveBatchLua    string
	reserveBatchSrc        = headLua + heartbeatLua + reserveLua + reserveBatchLua
	reserveBatchScript     = redis.NewScript(reserveBatchSrc)
	reserveBatchSHA    any = reserveBatchScript.Hash()
	reserveBatchSrcArg any = reserveBatchSrc

	//go:embed refund.lua
	refundLua    string
	refundScript = redis.NewScript(headLua + refundLua)

	//go:embed pause.lua
	pauseLua    string
	pauseScript = redis.NewScript(headLua + pauseLua)

	//go:embed limit.lua
	limitLua    string
	limitScript = redis.NewScript(headLua + limitLua)

	//go:embed hold.lua
	holdLua    string
	holdScript = redis.NewScript(headLua + holdLua)
)

// errRedisReply reports a script reply of an unexpected shape: a Redis (or
// proxy) that does not run our scripts as written. Nothing is booked.
var errRedisReply = errors.New("throttle: unexpected reply from Redis")

// MaxSpanMicros bounds every span the scripts add to a time: a rule's
// interval times its burst, a wait, a pause. Times are Unix microseconds
// (about 2^50.6 today) held in Lua doubles, exact below 2^53; with each
// span at most 2^49 µs (17.8 years) no sum the scripts form reaches 2^53.
const MaxSpanMicros = 1 << 49

// Store keeps buckets in Redis, shared by every Transport using the
// same Redis and namespace. A leaky or token bucket is one string key
// holding its TAT in Unix microseconds of Redis's clock; the scripts run the
// same GCRA steps as the local store (internal/localstore). A window
// bucket is a string of window counts or, for a sliding log, a sorted set,
// with an envelope key beside it (window.lua); the scripts run
// internal/algorithm's steps. It is safe for concurrent use (go-redis clients are).
type Store struct {
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

	// timeout, when set, bounds each Redis call on top of the caller's
	// context (see call); nil means the context alone.
	timeout *store.Timeout
	// hb, when set, is this replica's heartbeat: once per interval a
	// reserve call also registers the replica and records the count of
	// live replicas.
	hb *heartbeat
	// nowMicros, when set (tests only), is passed to the scripts as now
	// instead of Redis's TIME.
	nowMicros func() int64

	// batch sends reserve.lua calls, those of concurrent requests together.
	batch *scriptBatcher
	// warmed is closed when warm has ended (tests wait for it).
	warmed chan struct{}
	// quotas sends the quota.lua reads of concurrent requests together
	// (quota_batch.go).
	quotas quotaBatch

	keysMu sync.RWMutex
	keys   map[string]string // bucket.key → Redis key, see cachedKey

	// id tells this store's messages on the pause channel from the other
	// replicas' (pauses.go): random, and nothing else.
	id string
}

// Options is what a Redis store learns from the Transport that owns it:
// the options WithRedis, WithNamespace and WithHashTagPerKey set, and the
// wiring of the outage store around it. Apart from the namespace, the zero
// value, for tests, means no heartbeat, no timeout beyond the caller's
// context, and a client that honours context deadlines.
type Options struct {
	// Namespace is the namespace of every key: "throttle:{Namespace}:...".
	Namespace string
	// TagPerKey puts a partitioned bucket's hash into its key's hash tag
	// (WithHashTagPerKey).
	TagPerKey bool
	// Beat, when set, is the clock of this replica's heartbeat, which the
	// store then carries (see Store.hb).
	Beat Clock
	// Timeout bounds each call (see Store.call).
	Timeout *store.Timeout
	// Guard is set when the client ignores context deadlines: the batcher
	// then keeps each reserve call's deadline itself (scriptBatcher.guard).
	Guard bool
	// NowMicros, when set (tests only), is passed to the scripts as now
	// instead of Redis's TIME.
	NowMicros func() int64
}

// New returns a Redis store keeping its buckets in rdb as o says. It never
// closes rdb: its owner does.
func New(rdb redis.UniversalClient, o Options) *Store {
	_, cluster := rdb.(*redis.ClusterClient)
	s := &Store{
		rdb:       rdb,
		ns:        o.Namespace,
		prefix:    "throttle:{" + o.Namespace + "}:",
		tagPerKey: o.TagPerKey,
		split:     o.TagPerKey && cluster,
		timeout:   o.Timeout,
		nowMicros: o.NowMicros,
		keys:      make(map[string]string),
	}
	if o.Beat != nil {
		s.hb = newHeartbeat(s.prefix, o.Beat)
	}
	var id [8]byte
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(id[:])
	s.id = hex.EncodeToString(id[:])
	s.batch = &scriptBatcher{rdb: rdb, guard: o.Guard, abandoned: s.abandoned, work: make(chan *scriptCall)}
	s.warmed = make(chan struct{})
	go s.warm()
	return s
}

// warm loads the reserve scripts into Redis's script cache (on every
// master of a Cluster), on a goroutine New starts, bounded by warmTimeout.
// Without it each of a process's first reserve calls meets NOSCRIPT and
// goes again as EVAL, and Redis compiles the script before it decides: a
// fleet's first calls took 7-22 ms on a 2-core host, against 0.2-0.5 ms
// once loaded. A request booked without a wait then leaves late by most of
// that, and a burst booked so reaches the server together with the slots
// booked after it, which leave on time: a fleet of four sent its burst of
// 9 and the next two slots within 6 ms, one over the server's bucket of 10
// (internal/algorithmtest's token cell, without the race detector: one
// rejection 18-101 ms after the start in 10 runs of 10, 2026-12-07; none in
// 6 runs with warm). A failed load (Redis not up yet, an ACL without
// SCRIPT) changes nothing: the first calls load the script as before.
func (s *Store) warm() {
	defer close(s.warmed)
	ctx, cancel := context.WithTimeout(context.Background(), warmTimeout)
	defer cancel()
	if reserveScript.Load(ctx, s.rdb).Err() == nil {
		_ = reserveBatchScript.Load(ctx, s.rdb).Err()
	}
}

// warmTimeout bounds warm: a Redis that has not answered by then is no
// warmer for waiting, and the goroutine ends.
const warmTimeout = time.Second

// FleetSize returns the live replicas the heartbeat counted, once the count
// has settled, or 0 (before it has, or without a heartbeat).
func (s *Store) FleetSize() int64 {
	if s.hb == nil {
		return 0
	}
	return s.hb.size()
}

// Counted returns the live replicas the heartbeat counted at its last beat
// (0 before the first, or without a heartbeat), settled or not (see
// FleetSize).
func (s *Store) Counted() int64 {
	if s.hb == nil {
		return 0
	}
	return s.hb.live.Load()
}

// Split reports whether the buckets of one request may fall in different
// Cluster slots (WithHashTagPerKey on a Cluster client), so that a reserve
// may take one call per hash tag and keeps its context's deadline only
// through the client.
func (s *Store) Split() bool { return s.split }

// Namespace returns the namespace of the store's keys.
func (s *Store) Namespace() string { return s.ns }

// lateRefundTimeout bounds the refund of a booking whose caller had left.
const lateRefundTimeout = time.Second

// abandoned takes the reply of a reserve call whose caller gave up after it was
// sent: a slot booked for nobody goes back, as far as refund.lua can (see
// redisBooking). The refund runs on a goroutine of its own, so the pipeline
// that brought the reply does not wait for it.
func (s *Store) abandoned(c *scriptCall, reply string, err error) {
	if err != nil {
		return
	}
	u := newRedisBooking(s, c.bs)
	g, perr := s.parseReserve(reply, c.bs, u.tats(), c.beat)
	if perr != nil || !g.ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), lateRefundTimeout)
		defer cancel()
		_ = u.Cancel(ctx) // a failed refund leaves the slot spent: under the limit, never over
	}()
}

// redisBooking is the undo of a Redis store reservation: each bucket's TAT
// before and after the booking, in Redis's microseconds, so that refund.lua
// can tell whether its slot is still the last one.
type redisBooking struct {
	s       *Store
	buckets []store.Bucket
	// prev, booked and counts are indexed as buckets, as reserve.lua
	// replies them: booked[i] is 0 for a bucket not booked (deferred).
	// counts is the reservation's (reservation.counts).
	prev, booked, counts []int64
	done                 atomic.Bool
	// gate, when set (Gated), runs the refund: the outage store's.
	gate store.Gate
	// one holds the TATs and count of a one-bucket booking, the common
	// case, so that it costs one allocation.
	one [3]int64
}

func newRedisBooking(s *Store, bs []store.Bucket) *redisBooking {
	u := &redisBooking{s: s, buckets: bs}
	n := len(bs)
	tats := u.one[:]
	if n != 1 {
		tats = make([]int64, 3*n)
	}
	u.prev, u.booked, u.counts = tats[:n:n], tats[n:2*n:2*n], tats[2*n:3*n:3*n]
	return u
}

// tats returns where parseReserve writes the reply's TATs and counts.
func (u *redisBooking) tats() bookedTATs {
	return bookedTATs{prev: u.prev, booked: u.booked, counts: u.counts}
}

var _ store.Gated = (*redisBooking)(nil)

// Gated makes g the gate of u's refund (see store.Gated).
func (u *redisBooking) Gated(g store.Gate) store.Undo {
	u.gate = g
	return u
}

// Cancel runs refund.lua for the booked buckets, one call per hash tag
// when they may be split (see groups), through u's gate if it has one.
func (u *redisBooking) Cancel(ctx context.Context) error {
	if u.done.Swap(true) {
		return nil
	}
	if u.gate != nil {
		return u.gate.Refund(ctx, u.refund)
	}
	return u.refund(ctx)
}

// refund runs refund.lua for the booked buckets (see Cancel).
func (u *redisBooking) refund(ctx context.Context) error {
	var errs []error
	for _, idx := range u.s.callGroups(u.buckets) {
		errs = append(errs, u.refundGroup(ctx, idx))
	}
	return errors.Join(errs...)
}

// refundGroup runs refund.lua for the buckets at indices idx.
func (u *redisBooking) refundGroup(ctx context.Context, idx []int) error {
	keys := make([]string, 0, len(idx))
	args := make([]any, 1, 1+5*len(idx))
	args[0] = u.s.nowArg()
	for _, i := range idx {
		if u.booked[i] == 0 {
			continue // deferred: nothing was booked
		}
		b := &u.buckets[i]
		keys = append(keys, u.s.key(b))
		args = append(args, u.prev[i], u.booked[i], int64(b.Algorithm), windowMicros(b), b.Burst)
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := u.s.runScript(ctx, store.CallRefund, refundScript, keys, args...)
	return err
}

// Micros converts d to microseconds, rounding up: an interval is never
// shortened, so the Redis store is never faster than the rule.
func Micros(d time.Duration) int64 {
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
	return min(us, MaxSpanMicros)
}

// bucketArgs returns the number of reserve.lua's arguments for bucket b
// (see its header): 8 for a window bucket, 5 for the others, as before
// there were window buckets.
func bucketArgs(b *store.Bucket) int {
	if b.Algorithm.Windowed() {
		return 8
	}
	return 5
}

// windowMicros returns the window of a window bucket in µs (its rule's
// Period), 0 for a leaky or token bucket.
func windowMicros(b *store.Bucket) int64 {
	if !b.Algorithm.Windowed() {
		return 0
	}
	return Micros(b.Period)
}

// key returns the Redis key of bucket b.
func (s *Store) key(b *store.Bucket) string {
	if s.tagPerKey {
		if hash, ok := partitionHash(b); ok {
			return "throttle:p:{" + s.ns + ":" + hash + "}:" + b.Rule
		}
	}
	return s.prefix + b.Key
}

// keyCacheSize bounds the key cache; it is emptied when full. Hot buckets
// come back at once, and a cold one costs one string concatenation.
const keyCacheSize = 4096

// cachedKey returns key(b), remembering it: building a key costs an
// allocation on every request otherwise.
func (s *Store) cachedKey(b *store.Bucket) string {
	s.keysMu.RLock()
	k, ok := s.keys[b.Key]
	s.keysMu.RUnlock()
	if ok {
		return k
	}
	k = s.key(b)
	s.keysMu.Lock()
	if len(s.keys) >= keyCacheSize {
		clear(s.keys)
	}
	s.keys[b.Key] = k
	s.keysMu.Unlock()
	return k
}

// partitionHash returns the hashed partition key of b, if its rule has a
// Key: bucket keys are the rule's name, then ':' and the hash
// (the root's compiledRule.bucketKey).
func partitionHash(b *store.Bucket) (string, bool) {
	hash, ok := strings.CutPrefix(b.Key, b.Rule)
	if !ok || len(hash) < 2 || hash[0] != ':' {
		return "", false
	}
	return hash[1:], true
}

// anyTagged reports whether a bucket of bs has a hash tag of its own, not
// the namespace's.
func (s *Store) anyTagged(bs []store.Bucket) bool {
	for i := range bs {
		if s.tag(&bs[i]) != "" {
			return true
		}
	}
	return false
}

// tag returns the hash tag of bucket b's key: buckets with equal tags live
// in the same Cluster slot.
func (s *Store) tag(b *store.Bucket) string {
	if s.tagPerKey {
		if hash, ok := partitionHash(b); ok {
			return hash
		}
	}
	return ""
}

// call derives the context of one Redis call: ctx, bounded by the store's
// timeout unless ctx already ends sooner (the outage store bounds its other
// calls by the same timeout, so they make no second timer; it leaves
// reserve calls to the store, see outage.Options.ReserveKept). A client
// that ignores context deadlines keeps the bound only for reserve calls,
// which the batcher keeps instead of the client (see Options.Guard); the
// outage store guards the others.
func (s *Store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout == nil {
		return ctx, func() {}
	}
	return s.bound(ctx, s.timeout.Next())
}

// bound bounds ctx by d unless it already ends sooner.
func (s *Store) bound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, func() {}
	}
	return store.BoundContext(ctx, d)
}

// failed wraps err, the failure of a call with cctx derived from ctx (see
// call), as "throttle: redis <what>", marked as store.ErrTimeout when the
// store's own bound ended it. go-redis sets the bound as the socket's
// deadline, so its read may fail (i/o timeout) just before cctx is done:
// a deadline passed counts too.
func (s *Store) failed(what string, ctx, cctx context.Context, err error) error {
	var d time.Duration
	if s.timeout != nil {
		d = s.timeout.Next()
	}
	return s.failedAfter(what, ctx, cctx, d, err)
}

// failedAfter is failed for a call bounded by d.
func (s *Store) failedAfter(what string, ctx, cctx context.Context, d time.Duration, err error) error {
	if cctx != ctx && ctx.Err() == nil && (context.Cause(cctx) == store.ErrTimeout || pastDeadline(cctx)) {
		err = fmt.Errorf("%w after %v: %w", store.ErrTimeout, d, err)
	}
	return fmt.Errorf("throttle: redis %s: %w", what, err)
}

// pastDeadline reports whether ctx's deadline has passed.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// runScript runs script within the store's bound (see call), its error
// wrapped by failed.
func (s *Store) runScript(ctx context.Context, what string, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	// A script's first run is bounded as a cold call (store.Timeout.For;
	// the outage store marks its answer).
	cctx, cancel, d := ctx, context.CancelFunc(func() {}), time.Duration(0)
	if s.timeout != nil {
		d = s.timeout.For(what)
		cctx, cancel = s.bound(ctx, d)
	}
	defer cancel()
	cmd := script.Run(cctx, s.rdb, keys, args...)
	if err := cmd.Err(); err != nil {
		return cmd, s.failedAfter(what, ctx, cctx, d, err)
	}
	return cmd, nil
}

// nowArg is the scripts' now argument: "" makes them read Redis's TIME.
func (s *Store) nowArg() any {
	if s.nowMicros == nil {
		return ""
	}
	return s.nowMicros()
}

func (s *Store) Reserve(ctx context.Context, bs []store.Bucket, maxWait time.Duration) (store.Reservation, error) {
	if len(bs) == 0 {
		return store.Reservation{OK: true}, nil
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
				return store.Reservation{}, s.failed("heartbeat", ctx, cctx, err)
			}
			beat = false
		}
		if groups := s.groups(bs); len(groups) > 1 {
			return s.reserveSplit(ctx, bs, groups, maxWait)
		}
	}
	u := newRedisBooking(s, bs)
	g, err := s.reserveGroup(ctx, groupRequest{bs: bs, maxWait: spanMicros(maxWait, false), beat: beat}, u.tats())
	if err != nil {
		return store.Reservation{}, err
	}
	r := store.Reservation{OK: g.ok, Wait: g.waitDuration(), Limiter: g.limiter, Buckets: bs, Held: g.heldDuration(), Queued: g.queued}
	if g.ok {
		r.Counts, r.Deferred, r.Marks, r.Undo = u.counts, u.deferred(), u.booked, u
	}
	return r, nil
}

// deferred returns the indices of the buckets u did not book, or nil (see
// reservation.deferred).
func (u *redisBooking) deferred() []int {
	var idx []int
	for i, b := range u.booked {
		if b == 0 {
			idx = append(idx, i)
		}
	}
	return idx
}

// askOnly is reserve.lua's maxWait that books nothing and only reports the
// wait (see reserve.lua's header).
const askOnly int64 = -1

// groupRequest is one reserve.lua call: buckets bs (sharing a hash tag),
// departing no earlier than floor µs from now, within maxWait µs (or
// askOnly). With beat set (the caller won s.hb.due, and bs share the
// replica set's hash tag) the call also carries this replica's heartbeat
// and records the live count.
type groupRequest struct {
	bs             []store.Bucket
	floor, maxWait int64
	beat           bool
}

// groupReply is reserve.lua's reply, times in µs: whether it booked, the
// wait, the index in the request's buckets of the bucket that set it, and
// how long a pause holds them (see reservation.held).
type groupReply struct {
	ok      bool
	wait    int64
	limiter int
	held    int64
	queued  time.Duration // the call's wait in the batcher's queue
}

func (g groupReply) waitDuration() time.Duration { return microsDuration(g.wait) }
func (g groupReply) heldDuration() time.Duration { return microsDuration(g.held) }

// microsDuration converts the scripts' microseconds to a Duration.
func microsDuration(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// bookedTATs is where a booked reply's numbers go, indexed as the request's
// buckets: each bucket's TAT before and after the booking (both 0 when
// deferred) and its count (see reservation.counts). A call that only asks
// (askOnly) needs none.
type bookedTATs struct {
	prev, booked, counts []int64
}

// reserveGroup runs reserve.lua for q and, when booked, fills out.
//
// It is the hot path, trimmed for allocations: instead of Script.Run (which
// copies the keys into a new argument list and boxes each key and the
// digest) it hands the batcher (batch.go) an EVALSHA with a pooled argument
// list whose numbers and keys go by pointer (go-redis writes *int64 and
// *string without boxing); the batcher sends it alone or in one pipeline
// with concurrent calls, and falls back to EVAL on NOSCRIPT as Script.Run
// does.
func (s *Store) reserveGroup(ctx context.Context, q groupRequest, out bookedTATs) (groupReply, error) {
	bs := q.bs
	nk, nn := len(bs), 3
	for i := range bs {
		nn += bucketArgs(&bs[i])
	}
	if q.beat {
		// The replica set; room for the id and the TTL in the
		// arguments (nums[nn-2] stays unused: the id goes by pointer).
		nk, nn = nk+1, nn+2
	}
	c := getScriptCall(nk, nn)
	for i := range bs {
		c.keys[i] = s.cachedKey(&bs[i])
	}
	if q.beat {
		c.keys[len(bs)] = s.hb.key
	}
	var now any = ""
	if s.nowMicros != nil {
		c.nums[0] = s.nowMicros()
		now = &c.nums[0]
	}
	c.begin(now)
	c.nums[1], c.nums[2] = q.maxWait, q.floor
	c.add(&c.nums[1], &c.nums[2])
	for i, j := 0, 3; i < len(bs); i++ {
		b := &bs[i]
		if b.Algorithm.Windowed() {
			c.nums[j], c.nums[j+1], c.nums[j+2] = -int64(b.Algorithm), b.Burst, b.Cost
			c.nums[j+3], c.nums[j+4] = Micros(b.Interval), b.Sent
			_, c.nums[j+6], c.nums[j+7] = b.WindowMicros()
			c.nums[j+5] = windowMicros(b)
			c.add(&c.nums[j], &c.nums[j+1], &c.nums[j+2], &c.nums[j+3], &c.nums[j+4], &c.nums[j+5], &c.nums[j+6], &c.nums[j+7])
			j += 8
			continue
		}
		c.nums[j], c.nums[j+1], c.nums[j+2] = Micros(b.Interval), b.Burst, b.Cost
		c.nums[j+3], c.nums[j+4] = latenessArg(b), b.Sent
		c.add(&c.nums[j], &c.nums[j+1], &c.nums[j+2], &c.nums[j+3], &c.nums[j+4])
		j += 5
	}
	if q.beat {
		_, c.nums[nn-1] = s.hb.args()
		c.add(&s.hb.id, &c.nums[nn-1])
	}
	c.bs, c.beat = bs, q.beat
	if s.tagPerKey {
		// On a Cluster bs share one tag (see groups), and a call with the
		// beat has none; on one node the tag only groups calls, which any
		// grouping keeps correct.
		c.tag = s.tag(&bs[0])
	}
	// The store's bound: with guard, the batcher keeps it with a timer in
	// c (no context, and its timer and closures, per call); otherwise the
	// client keeps it from the context's deadline.
	cctx, cancel, timeout := ctx, context.CancelFunc(nil), time.Duration(0)
	if s.batch.guard && s.timeout != nil {
		timeout = s.timeout.Next()
	} else {
		cctx, cancel = s.call(ctx)
		defer cancel()
		c.deadline, _ = cctx.Deadline()
	}
	reply, queued, err := s.batch.do(cctx, c, timeout) // c is the batcher's from here on
	if err == errCallTimeout {
		return groupReply{}, fmt.Errorf("throttle: redis reserve: %w after %v", store.ErrTimeout, timeout)
	}
	if err != nil {
		return groupReply{}, s.failed("reserve", ctx, cctx, err)
	}
	g, err := s.parseReserve(reply, bs, out, q.beat)
	g.queued = queued
	return g, err
}

// latenessArg is reserve.lua's lateness argument for leaky or token bucket
// b: its lateness tolerance in µs, or −1 − that when the bucket can hold
// a credit (Bucket.Corrected), so that the script looks for one only
// then, in the argument it has (a credit costs the other buckets nothing).
func latenessArg(b *store.Bucket) int64 {
	l := spanMicros(b.Lateness, false)
	if b.Corrected {
		return -1 - l
	}
	return l
}

// parseReserve parses reserve.lua's reply for buckets bs; see reserveGroup.
func (s *Store) parseReserve(reply string, bs []store.Bucket, out bookedTATs, beat bool) (groupReply, error) {
	bad := func(what string) (groupReply, error) {
		return groupReply{}, fmt.Errorf("%w: reserve returned %.64q%s", errRedisReply, reply, what)
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
	g := groupReply{ok: okFlag == 1, wait: wait, limiter: int(lim), held: held}
	if !g.ok {
		if rest != "" {
			return bad("")
		}
		return g, nil
	}
	for i := range bs {
		var okP, okB, okN bool
		out.prev[i], rest, okP = nextInt(rest)
		out.booked[i], rest, okB = nextInt(rest)
		out.counts[i], rest, okN = nextInt(rest)
		if !okP || !okB || !okN {
			return bad(fmt.Sprintf(" for %d buckets", len(bs)))
		}
	}
	if rest != "" {
		return bad(fmt.Sprintf(" for %d buckets", len(bs)))
	}
	return g, nil
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

func (s *Store) Pause(ctx context.Context, bs []store.Bucket, d time.Duration) error {
	start := time.Now()
	var errs []error
	for _, idx := range s.callGroups(bs) {
		keys := make([]string, 0, len(idx))
		args := make([]any, 0, 2+4*len(idx))
		args = append(args, s.nowArg(), spanMicros(d, true))
		for _, i := range idx {
			b := &bs[i]
			keys = append(keys, s.key(b))
			args = append(args, Micros(b.Interval), b.Burst, int64(b.Algorithm), windowMicros(b))
		}
		_, err := s.runScript(ctx, store.CallPause, pauseScript, keys, args...)
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if left := d - time.Since(start); err == nil && left > 0 {
		// What is left of it: the receivers count from the message.
		s.publishPause(ctx, bs, left)
	}
	return err
}

func (s *Store) Limit(ctx context.Context, b store.Bucket, c store.Cap) (store.Stretch, error) {
	span := max(spanMicros(c.Span, true), 1)
	cmd, err := s.runScript(ctx, store.CallLimit, limitScript, []string{s.key(&b)}, s.nowArg(), c.Rate, c.Slope, span, int64(b.Algorithm), windowMicros(&b), max(Micros(b.Interval), 1), max(c.Debt, 0), retimeArg(c.Retime), max(Micros(c.PayBy), 0))
	if err != nil {
		return store.Stretch{}, err
	}
	v, err := cmd.Int64Slice()
	if err != nil || len(v) < 3 {
		return store.Stretch{}, fmt.Errorf("throttle: redis limit: unexpected reply: %w", err)
	}
	st := stretchOf(v[0], v[1], v[2])
	if st.Moves() {
		s.publishStretch(ctx, b, st)
	}
	return st, nil
}

// retimeArg is limit.lua's retime argument.
func retimeArg(retime bool) int {
	if retime {
		return 1
	}
	return 0
}

// stretchOf reads limit.lua's stretch of a bucket: where it starts, in µs
// from the script's now, and the new and old intervals in µs.
func stretchOf(fromMicros, will, was int64) store.Stretch {
	if will == was || will <= 0 || was <= 0 {
		return store.Stretch{}
	}
	return store.Stretch{From: microsDuration(max(fromMicros, 0)), Ratio: float64(will) / float64(was)}
}

func (s *Store) Held(ctx context.Context, bs []store.Bucket) (time.Duration, error) {
	var held int64
	for _, idx := range s.callGroups(bs) {
		keys := make([]string, 0, len(idx))
		args := make([]any, 1, 1+len(idx))
		args[0] = s.nowArg()
		for _, i := range idx {
			keys = append(keys, s.key(&bs[i]))
			args = append(args, int64(bs[i].Algorithm))
		}
		cmd, err := s.runScript(ctx, store.CallHold, holdScript, keys, args...)
		if err != nil {
			return 0, err
		}
		h, err := cmd.Int64()
		if err != nil {
			return 0, fmt.Errorf("throttle: redis hold: %w", err)
		}
		held = max(held, h)
	}
	return microsDuration(held), nil
}

// callGroups returns the indices of bs grouped by the script calls that
// handle them: by hash tag when they may be split (see groups), else all
// of them in one; none when bs is empty.
func (s *Store) callGroups(bs []store.Bucket) [][]int {
	if len(bs) == 0 {
		return nil
	}
	if s.split {
		if groups := s.groups(bs); len(groups) > 1 {
			return groups
		}
	}
	all := make([]int, len(bs))
	for i := range all {
		all[i] = i
	}
	return [][]int{all}
}

// groups returns the indices of bs grouped by hash tag, in order of first
// appearance: each group can be booked by one script call on a Cluster.
func (s *Store) groups(bs []store.Bucket) [][]int {
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
func (s *Store) reserveSplit(ctx context.Context, bs []store.Bucket, groups [][]int, maxWait time.Duration) (store.Reservation, error) {
	u := newRedisBooking(s, bs)
	maxUs := spanMicros(maxWait, false)
	sub := make([][]store.Bucket, len(groups))
	var floor, held int64
	limiter := 0
	for g, idx := range groups {
		sub[g] = make([]store.Bucket, len(idx))
		for j, i := range idx {
			sub[g][j] = bs[i]
		}
		gr, err := s.reserveGroup(ctx, groupRequest{bs: sub[g], maxWait: askOnly}, bookedTATs{})
		if err != nil {
			return store.Reservation{}, err
		}
		if gr.wait > floor {
			floor, limiter = gr.wait, idx[gr.limiter]
		}
		held = max(held, gr.held)
	}
	if floor > maxUs {
		return store.Reservation{Wait: microsDuration(floor), Limiter: limiter, Buckets: bs, Held: microsDuration(held)}, nil
	}
	booked := make([]bool, len(groups))
	depart := floor
	for g, idx := range groups {
		m := len(idx)
		gt := make([]int64, 3*m)
		gr, err := s.reserveGroup(ctx, groupRequest{bs: sub[g], floor: floor, maxWait: maxUs}, bookedTATs{gt[:m], gt[m : 2*m], gt[2*m:]})
		if err != nil {
			u.rollback(ctx, groups, booked)
			return store.Reservation{}, err
		}
		held = max(held, gr.held)
		if !gr.ok {
			u.rollback(ctx, groups, booked)
			return store.Reservation{Wait: gr.waitDuration(), Limiter: idx[gr.limiter], Buckets: bs, Held: microsDuration(held)}, nil
		}
		for j, i := range idx {
			u.prev[i], u.booked[i], u.counts[i] = gt[j], gt[m+j], gt[2*m+j]
		}
		booked[g] = true
		if gr.wait > depart {
			depart, limiter = gr.wait, idx[gr.limiter]
		}
	}
	return store.Reservation{
		OK: true, Wait: microsDuration(depart), Limiter: limiter, Buckets: bs,
		Held: microsDuration(held), Counts: u.counts, Deferred: u.deferred(), Marks: u.booked, Undo: u,
	}, nil
}

// rollback refunds the groups of u marked booked. It runs even when ctx is
// done: the slots must go back.
func (u *redisBooking) rollback(ctx context.Context, groups [][]int, booked []bool) {
	for g, idx := range groups {
		if booked[g] {
			// A failed refund leaves the slot spent: the fleet runs under
			// the limit, never over. The caller reports the first error.
			_ = u.refundGroup(context.WithoutCancel(ctx), idx)
		}
	}
}
