-- return.lua starts, or joins, the fleet's return grace after an outage of
-- Redis: the first replica back sets the key for the grace; those back
-- later get what is left of it, so that the whole fleet leaves the grace
-- together, a grace after the first return (fallback.go).
--
-- KEYS[1]   "throttle:{ns}:lease:return".
-- ARGV[1]   the grace in ms.
--
-- Reply: the ms left of the fleet's grace (at most ARGV[1]).

redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  left = 0
end
return left
