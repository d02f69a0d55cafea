-- heartbeat.lua: the helper that registers a replica as alive and counts the
-- live replicas of its namespace, so that during a Redis outage each replica
-- knows its share of the fleet's quota (see docs/OUTAGES.md). heartbeat.go
-- prepends it (after bucket.lua) to reserve.lua, which beats on the way
-- when a beat is due, and runs it on its own (heartbeatCall) when a
-- request's buckets lie in other Cluster slots than the replica set.
--
-- The replica set, "throttle:{ns}:replicas", is a sorted set whose members
-- are replica ids (random; never derived from a secret) and whose scores
-- are the time (µs, Redis's clock) at which each replica stops counting.
-- Expired members are trimmed on every beat, and the set itself expires a
-- second after its last member would, so a namespace whose fleet is gone
-- leaves nothing behind. Scores stay below 2^53, exact in doubles, and are
-- written with %d because tostring rounds to 14 digits (see bucket.lua).
--
-- Commands: ZREMRANGEBYSCORE, ZADD, PEXPIRE, ZCARD (the ACL in
-- docs/REDIS.md grants them).

-- beat registers replica id in set until now + ttl (µs) and returns the
-- number of live replicas, this one included (an integer ≥ 1).
local function beat(set, id, ttl, now)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', string.format('%d', now))
  redis.call('ZADD', set, string.format('%d', now + ttl), id)
  redis.call('PEXPIRE', set, string.format('%d', math.ceil(ttl / 1000) + 1000))
  return redis.call('ZCARD', set)
end
