-- pause.lua holds buckets shut until now + d: the next request of cost 1
-- conforms at that time and the bucket refills from empty afterwards
-- (gcraPause in leaky.go, in integer microseconds). It never shortens a
-- longer hold already in place.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   d: the pause in µs (≥ 0).
-- ARGV[2i+1], ARGV[2i+2]   bucket i's interval in µs (≥ 1) and burst.
--
-- Reply: the number of buckets whose TAT moved.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local untilT = now + tonumber(ARGV[2])
local moved = 0
for i = 1, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i])) or 0
  local held = untilT + (tonumber(ARGV[2 * i + 2]) - 1) * tonumber(ARGV[2 * i + 1])
  if held > tat then
    redis.call('SET', KEYS[i], string.format('%.0f', held),
      'PX', string.format('%.0f', math.ceil((held - now) / 1000) + 1000))
    moved = moved + 1
  end
end
return moved
