-- pause.lua holds buckets shut until now + d: the next request of cost 1
-- conforms at that time and the bucket refills from empty afterwards
-- (gcraPause in internal/localstore, in integer microseconds, at the
-- interval in force). It never shortens a longer hold already in place. It
-- also records the pause's end in the bucket (its hold, see bucket.lua), which
-- reserve.lua reports to every replica that books the bucket until then:
-- their waiters whose slots were booked before the pause, inside it, book
-- again after it (waitQueue.hold) instead of leaving into the server's
-- rejection.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   d: the pause in µs (≥ 0).
-- ARGV[2i+1], ARGV[2i+2]   bucket i's rule interval in µs (≥ 1) and burst.
--
-- Reply: the number of buckets whose TAT moved.

local now = now_us(ARGV[1])
local untilT = now + tonumber(ARGV[2])
local moved = 0
for i = 1, #KEYS do
  local tat, a, _, hold, n = load(KEYS[i], now)
  local iv = interval(tonumber(ARGV[2 * i + 1]), a, now)
  local held = untilT + (tonumber(ARGV[2 * i + 2]) - 1) * iv
  if held > tat then
    tat = held
    moved = moved + 1
  end
  if untilT > now and (not hold or untilT > hold) then
    hold = untilT
  end
  save(KEYS[i], tat, a, now, hold, n)
end
return moved
