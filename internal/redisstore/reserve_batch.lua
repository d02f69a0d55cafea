-- reserve_batch.lua books the requests of one pipeline in one call
-- (batch.go), in order, each on its own all or nothing exactly as
-- reserve_call.lua would, at one now: the calls would have run back to back
-- anyway, and one TIME, one script dispatch and one reply serve them all.
-- store_redis.go prepends bucket.lua, heartbeat.lua and reserve.lua.
--
-- KEYS     the keys of request 1, then those of request 2, and so on; all
--          share one {hash tag}.
-- ARGV[1]  now in µs since the Unix epoch, or "" to use Redis's TIME
--          (tests only pass a now).
-- ARGV[2]  m, the number of requests.
-- Then, for each request: its number of keys nk, its number of arguments
-- na, and its na arguments as reserve.lua lists them.
--
-- Reply: an array of m strings, request i's reply from reserve.lua at i.

local now = now_us(ARGV[1])
local replies = {}
local k, a = 0, 2
for r = 1, ARGV[2] + 0 do
  local nk, na = ARGV[a + 1] + 0, ARGV[a + 2] + 0
  replies[r] = reserve(k, nk, a + 2, na, now)
  k, a = k + nk, a + 2 + na
end
return replies
