-- refund.lua gives back a reservation made by reserve.lua: each bucket gets
-- its previous TAT back, but only where the stored TAT still equals the one
-- the reservation booked. A bucket in which a later request has booked
-- since is left alone: that request keeps its place in the queue, and the
-- refunded slot stays spent (the fleet runs under the limit, never over).
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2i], ARGV[2i+1]   bucket i's TAT (µs) before and after the booking.
--
-- Reply: the number of buckets restored.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local restored = 0
for i = 1, #KEYS do
  local cur = tonumber(redis.call('GET', KEYS[i]))
  if cur ~= nil and cur == tonumber(ARGV[2 * i + 1]) then
    local prev = tonumber(ARGV[2 * i])
    -- A TAT at or before now equals a fresh bucket; it still gets a short
    -- expiry rather than a DEL, so the ACL needs no DEL.
    redis.call('SET', KEYS[i], string.format('%.0f', prev),
      'PX', string.format('%.0f', math.ceil(math.max(prev - now, 0) / 1000) + 1000))
    restored = restored + 1
  end
end
return restored
