-- heartbeat.lua registers a replica as alive and counts the live replicas
-- of its namespace, so that during a Redis outage each replica knows its
-- share of the fleet's quota (see docs/OUTAGES.md).
--
-- KEYS[1]  the namespace's replica set, "throttle:{ns}:replicas": a sorted
--          set whose members are replica ids and whose scores are the time
--          (µs, Redis's clock) at which each replica stops counting.
-- ARGV[1]  now in µs since the Unix epoch, or "" to use Redis's TIME (tests
--          only pass a now).
-- ARGV[2]  this replica's id (random; never derived from a secret).
-- ARGV[3]  TTL in µs: the replica counts until now + TTL unless it beats
--          again.
--
-- Reply: the number of live replicas, this one included (an integer ≥ 1).
--
-- Expired members are trimmed on every beat, and the set itself expires a
-- second after its last member would, so a namespace whose fleet is gone
-- leaves nothing behind. Scores stay below 2^53, exact in doubles, and are
-- written with %.0f because tostring rounds to 14 digits.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl), ARGV[2])
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.ceil(ttl / 1000) + 1000))
return redis.call('ZCARD', KEYS[1])
