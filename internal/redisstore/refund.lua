-- refund.lua gives back a reservation made by reserve.lua. A leaky or
-- token bucket gets its previous TAT back, but only where the stored TAT
-- still equals the one the reservation booked. A bucket in which a later
-- request has booked since is left alone: that request keeps its place in
-- the queue, and the refunded slot stays spent (the fleet runs under the
-- limit, never over). A fixed window or sliding counter always gets the
-- cost back (its window's count) as long as the window is still kept:
-- taking a request out only lowers what the requests behind it were
-- admitted under. A sliding log gets its entries at the departure back as
-- far as window.lua's logRefund can: a log holding its quota moves them to
-- its oldest entry instead (entries it trimmed may still count). A cap's own constraint (the
-- envelope's TAT, see window.lua) is not given back. A bucket's cap and
-- count are kept: the count is of what the fleet sent, and a refunded slot
-- was never sent.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[5i-3] … ARGV[5i+1]   bucket i's prev and booked as reserve.lua
--           replied them (the TATs in µs before and after the booking; for
--           a window bucket the window's start, or the departure for a
--           sliding log, and the cost), its algorithm's code, its window
--           in µs (0 for a leaky or token bucket) and its quota (a window
--           bucket's Burst; read by the sliding log only).
--
-- Reply: the number of buckets restored.

local now = now_us(ARGV[1])
local W = windowLib()
local restored = 0
for i = 1, #KEYS do
  local j = 5 * i - 3
  local alg = ARGV[j + 2] + 0
  if alg < 2 then
    local cur, a, _, hold, n = load(KEYS[i], now)
    -- A booked TAT is never 0, which load returns for a missing key.
    if cur == tonumber(ARGV[j + 1]) then
      save(KEYS[i], tonumber(ARGV[j]), a, now, hold, n)
      restored = restored + 1
    end
  elseif alg == 3 then
    if W.logRefund(KEYS[i], ARGV[j + 3] + 0, ARGV[j + 4] + 0, now, ARGV[j] + 0, ARGV[j + 1] + 0) then
      restored = restored + 1
    end
  else
    local p = ARGV[j + 3] + 0
    local c = W.loadCounts(KEYS[i])
    if W.countSub(c, p, ARGV[j] + 0, ARGV[j + 1] + 0) then
      local keep = p
      if alg == 2 then
        keep = 0
      end
      W.saveCounts(KEYS[i], c, p, now, keep)
      restored = restored + 1
    end
  end
end
return restored
