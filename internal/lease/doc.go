// Package lease is the machinery of fleet-wide concurrency caps (issue 12):
// a request that needs caps (Twilio's 10 requests in flight per account,
// GitHub's 100, Stripe's concurrency limiter) takes one lease in each, all
// or none, and gives them back when its response is done. The root's
// Transport calls it for Rule.Concurrency.
//
// # Stores
//
// Local is an in-process semaphore per cap key. Redis shares the caps of a
// fleet through Redis. Fallback is a Redis store that keeps granting leases
// from a local semaphore while Redis is down. All three implement Store and
// serve waiters in the same order: by effective arrival, the arrival time
// minus Priority × the aging step (DefaultAging, 1 s), earliest first, FIFO
// among equals. So a High request overtakes Normal ones that arrived less
// than one step before it, and a Low request that has waited longer than
// two steps goes before a new High one: nothing starves.
//
// # The Redis model
//
// Each cap key has a ZSET of holders, member a fencing token (HINCRBY on
// the key's hash, which starts at Redis's clock in µs so that tokens keep
// growing across a Redis restart), score its expiry on Redis's clock; a
// ZSET of waiting tickets scored by effective arrival; a ZSET of the same
// tickets scored by their expiry; and a hash (the fence, the adaptive
// cap). The keys are "throttle:{ns}:lease:<Cap.Key>:h|q|x|s": one hash tag
// per namespace, so that every cap of a request is in one Cluster slot and
// one script call takes all or none. Every script first purges the expired
// holders and tickets of the keys it touches.
//
// acquire.lua puts the request's ticket in every cap's queue and grants the
// leases only if the ticket is within the first (cap − holders) tickets of
// every queue: first come, first served across the fleet. Otherwise the
// ticket stays and the request sleeps; Redis sees nothing from it but its
// share of the renewals. release.lua removes a token (a token that expired
// frees nothing: someone else may hold the slot) and hands the freed slots
// on: each ticket of a one-cap request among the first (cap − holders) is
// granted its lease there and then (a holder with a fresh token, recorded
// for the ticket, its queue place removed); the others, whose requests
// need several caps and so must take them all at once, may now acquire.
// It PUBLISHes them on the cap's channel, a grant as ticket:token; the
// store's one pub/sub connection hands each to its waiter, which holds
// its lease without a call, or tries again. A release's reply names its
// grants too, so a waiter of the releasing store is handed its lease
// before the message arrives. A Cluster forwards PUBLISH to every node, so
// the connection may be on any.
//
// A waiter that missed its grant's message finds the grant with its next
// acquire.lua call (a renewal round wakes it); a withdrawal gives back a
// grant not taken. Until its waiter's store renews it (a round it asks
// for at once), a granted lease expires with its ticket, but not within a
// third of the ticket TTL of the grant, so a grant to a waiter that died
// holds its slot little longer than its ticket would have held its place.
//
// Leases live DefaultTTL (10 s) unrenewed, tickets DefaultTicketTTL (1 s).
// One renewal loop per store renews all its leases and tickets in one
// renew.lua call (per 256 caps) every TTL/3, or every third of the ticket
// TTL while the store has a waiter: a crashed waiter's tickets leave the
// head of the queue about a second after its last round. The loop marks
// lost (Lease.Lost) a lease Redis no longer knows or that went unrenewed
// for a TTL, and wakes the waiters that may acquire or were granted: it is
// the net under a lost message. The loop also runs a round at the
// earliest expiry or cap climb a waiting reply names, so the slot of a
// crashed holder, whose release never comes, reaches a waiter as soon as
// it expires. A resubscription of the pub/sub connection after a reconnect
// wakes every waiter of the channel.
//
// # Fallback while Redis is down
//
// The first failed Redis call (an error, or no answer within the per-call
// timeout, DefaultCallTimeout; a client that ignores context deadlines, as
// go-redis does by default, is guarded so that a stalled Redis still fails
// at the timeout) sends the Fallback down: new requests, and the waiters
// (woken so that their next call fails), take leases from a local
// semaphore whose limit is this replica's share, ceil(Limit / live
// replicas) when that many shares stay within 110 % of the Limit, else
// floor(Limit / live replicas), at least 1; live replicas from the
// caller's func() int; when that returns 0 or less, the last count above
// 0 it returned (the root's heartbeat distrusts its count for a beat or
// two after Redis restarted empty, during the return grace); before any,
// the WithFleetSize default; when that is not set either, the whole Limit
// (availability first: a fleet of N may then admit N × Limit).
// The Redis leases still held at the switch count against the local
// semaphore until released, so a replica that held more than its share
// admits nothing new until it is back under it.
//
// Every DefaultProbeEvery (250 ms) one request PINGs Redis. When it
// answers, the Fallback first sends again the releases and withdrawals the
// outage swallowed (a stalled Redis still holds the slots and the queue
// places of the requests in flight at the stall), then registers in Redis
// every lease the local semaphore still counts, as a holder forced past
// the cap and released there too, and only then sends new requests to
// Redis; local waiters leave the local semaphore for the Redis queue. For
// DefaultReturnGrace (1.5 s) after the return a request takes a local lease
// (its share) as well as the Redis one: the other replicas, still local
// and invisible to Redis, return one by one within about a second. The
// grace is the fleet's: it runs from the first replica's return (a key in
// Redis), and a replica back later keeps its share only for what is left.
//
// So a fleet at its cap stays within 110 % of it while Redis is down (at
// the price of using as little as Limit − live + 1 of it when the shares
// are floored; not at all when there are more replicas than Limit), plus
// the excess of a replica that held more than its share at the switch,
// until those requests finish; and it is back on the shared cap one probe
// interval after Redis answers each replica.
//
// Every store of a fleet must use the same namespace, TTL, aging step and
// climb period: the scripts take them from each caller.
//
// # Adaptive cap
//
// The cap in force under a key is min(Limit, lowered + climbed, Limit −
// others), floor 1. Lower records a refusal by the server (Twilio 20429,
// Stripe's global-concurrency): the cap drops to the holders in flight
// minus one, never rising by a refusal, and climbs back by one per
// DefaultClimb (2 s) without refusal: an additive increase after a drop to
// what the server just proved too many. Observe takes the server's count
// of requests in flight on the account (Twilio-Concurrent-Requests): what
// exceeds the fleet's own holders is someone else's use, subtracted from
// the Limit for DefaultObserveTTL (5 s), after which the view fades. Both
// live in Redis, for every replica. While Redis is down the Fallback runs
// the same model on its local semaphore (a refusal then lowers this
// replica's share, counted against its local holders).
package lease
