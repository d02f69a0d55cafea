-- charge.lua books more units of cost in a bucket once the server has said
-- what a request really cost (internal/localstore's gcraCharge, in µs): the
-- TAT moves later by units intervals, from now if the bucket had room. A
-- negative charge is a refund, given only to a bucket with no request
-- booked ahead of now (gcraCharge says why): earlier by -units intervals,
-- never before now. The bucket's cap, hold and count are kept.
--
-- KEYS[1]  the bucket's key.
-- ARGV[1]  now in µs, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]  the rule's interval in µs (≥ 1).
-- ARGV[3]  the units to charge (< 0: to refund), never 0.
-- ARGV[4]  the rule's burst.
--
-- Reply: the TAT after the call, µs.

local now = now_us(ARGV[1])
local key = KEYS[1]
local tat, a, _, hold, n = load(key, now)
local units = tonumber(ARGV[3])
local iv = interval(tonumber(ARGV[2]), a, now)
if units > 0 then
  tat = math.max(tat, now) + units * iv
elseif tat > now and tat - now <= tonumber(ARGV[4]) * iv then
  tat = math.max(tat + units * iv, now)
else
  return tat
end
save(key, tat, a, now, hold, n)
return tat
