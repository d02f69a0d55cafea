-- lower.lua keeps the fleet's effective cap of one key in line with what
-- the server says. ARGV[6] "lower": the server refused a request as too
-- many concurrent; the cap drops to the holders in flight minus one (floor
-- 1; never above where it already is) and restarts its climb, one per
-- climb period. "observe": the server counted ARGV[7] requests in flight
-- on the account; those beyond this key's holders are others', and for
-- ARGV[8] ms the cap is the limit minus them.
--
-- KEYS      the 4 keys of one cap, as lease.lua describes.
-- ARGV[1]   now in ms, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]   the climb period in ms.
-- ARGV[3]   ms after which idle keys expire.
-- ARGV[4]   the cap's limit.
-- ARGV[5]   the cap's channel.
-- ARGV[6]   "lower" or "observe".
-- ARGV[7]   observe: the server's count of requests in flight.
-- ARGV[8]   observe: how long the count holds, in ms.
-- ARGV[9]   the TTL in ms of a ticket, which a grant takes.
--
-- Reply: the effective cap after the call.

local now = now_ms(ARGV[1])
local climb, keepMs, limit, ch = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
purge(1, now)
local held = redis.call('ZCARD', KEYS[1])
local before = cap(1, limit, now, climb)
if ARGV[6] == 'lower' then
  local low = held - 1
  if low > before then
    low = before
  end
  if low < 1 then
    low = 1
  end
  redis.call('HSET', KEYS[4], 'low', low, 'lowAt', now)
else
  local others = tonumber(ARGV[7]) - held
  if others < 0 then
    others = 0
  end
  redis.call('HSET', KEYS[4], 'others', others, 'othersUntil', now + tonumber(ARGV[8]))
end
local after = cap(1, limit, now, climb)
if after > before then
  wake(1, limit, now, climb, ch, '', tonumber(ARGV[9]))
end
keep(1, keepMs)
return after
