-- limit.lua caps buckets at the rate the server's answers leave the fleet
-- (quotaview.go decides it; localStore.limit is the same in Go): from now
-- the bucket's interval is at least that of rate0 units of cost per second,
-- climbing by slope per second, until now + span. A rate0 of 0 caps
-- nothing: the bucket is only counted (its n, see bucket.lua), so that the
-- replicas can tell what the fleet itself sent in the server's window. The
-- count carries on from the cap in force, or starts at 1 (so that a
-- counted bucket never reports 0, which stands for not counted).
--
-- The slots already booked are re-timed to the new interval: the TAT's
-- lead over now is scaled by the new interval over the old one (both as in
-- force at now), so that a queue booked at a cut rate moves up when the
-- rate recovers, and one booked at the rule's rate spreads out when it is
-- cut. The caller re-times its own waiters by the same factor
-- (waitQueue.warp); a pause's hold is kept.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[4i-2] … ARGV[4i+1]   bucket i's rate0 (units per second, ≥ 0),
--           slope (units per second per second, ≥ 0), span (µs, ≥ 1) and
--           rule interval in µs (≥ 1).
--
-- Reply: one string, each bucket's factor (%.17g) separated by spaces.

local now = now_us(ARGV[1])
local reply = {}
for i = 1, #KEYS do
  local tat, old, _, hold, n = load(KEYS[i], now)
  if n < 1 then
    n = 1
  end
  local iv = tonumber(ARGV[4 * i + 1])
  local a = {tonumber(ARGV[4 * i - 2]), now, tonumber(ARGV[4 * i - 1]), now + tonumber(ARGV[4 * i])}
  local k = interval(iv, a, now) / interval(iv, old, now)
  -- The hold's end stays: no slot is booked inside a pause.
  local floor = hold or now
  if tat > floor and k ~= 1 then
    tat = floor + math.floor((tat - floor) * k)
  end
  save(KEYS[i], tat, a, now, hold, n)
  reply[i] = string.format('%.17g', k)
end
return table.concat(reply, ' ')
