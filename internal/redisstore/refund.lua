-- refund.lua gives back a reservation made by reserve.lua: each bucket gets
-- its previous TAT back, but only where the stored TAT still equals the one
-- the reservation booked. A bucket in which a later request has booked
-- since is left alone: that request keeps its place in the queue, and the
-- refunded slot stays spent (the fleet runs under the limit, never over).
-- A bucket's cap and count are kept: the count is of what the fleet sent,
-- and a refunded slot was never sent.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2i], ARGV[2i+1]   bucket i's TAT (µs) before and after the booking.
--
-- Reply: the number of buckets restored.

local now = now_us(ARGV[1])
local restored = 0
for i = 1, #KEYS do
  local cur, a, _, hold, n = load(KEYS[i], now)
  -- A booked TAT is never 0, which load returns for a missing key.
  if cur == tonumber(ARGV[2 * i + 1]) then
    save(KEYS[i], tonumber(ARGV[2 * i]), a, now, hold, n)
    restored = restored + 1
  end
end
return restored
