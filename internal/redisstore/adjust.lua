-- adjust.lua charges a bucket more units of cost, or refunds some, once
-- the server has said what a request really cost (internal/localstore's
-- gcraAdjust, in µs): a charge moves the TAT later by delta intervals, from
-- now if the bucket had room; a refund moves it earlier, never before now.
-- The bucket's cap, hold and count are kept.
--
-- KEYS[1]  the bucket's key.
-- ARGV[1]  now in µs, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]  the rule's interval in µs (≥ 1).
-- ARGV[3]  delta, the units of cost to charge (< 0: to refund), never 0.
--
-- Reply: the TAT after the call, µs.

local now = now_us(ARGV[1])
local key = KEYS[1]
local tat, a, _, hold, n = load(key, now)
local iv = interval(tonumber(ARGV[2]), a, now)
local delta = tonumber(ARGV[3])
if delta > 0 then
  tat = math.max(tat, now) + delta * iv
elseif tat > now then
  tat = math.max(tat + delta * iv, now)
else
  return tat
end
save(key, tat, a, now, hold, n)
return tat
