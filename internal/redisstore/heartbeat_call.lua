-- heartbeat_call.lua beats on its own (heartbeat.go prepends bucket.lua and
-- heartbeat.lua): for a request whose buckets lie in other Cluster slots
-- than the replica set, and for the tests.
--
-- KEYS[1]  the namespace's replica set, "throttle:{ns}:replicas".
-- ARGV[1]  now in µs since the Unix epoch, or "" to use Redis's TIME (tests
--          only pass a now).
-- ARGV[2]  this replica's id.
-- ARGV[3]  TTL in µs: the replica counts until now + TTL unless it beats
--          again.
--
-- Reply: the number of live replicas, this one included (an integer ≥ 1).

return beat(KEYS[1], ARGV[2], tonumber(ARGV[3]), now_us(ARGV[1]))
