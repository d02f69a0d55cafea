-- release.lua gives leases back and withdraws a ticket, then publishes on
-- each cap's channel the tickets that may now acquire. A token that is no
-- longer a holder (it expired, and someone else may hold the slot) frees
-- nothing.
--
-- KEYS      4 per cap, as lease.lua describes.
-- ARGV[1]   now in ms, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]   a ticket id to withdraw from every cap's queue, or "".
-- ARGV[3]   the climb period in ms (lower.lua).
-- ARGV[4]   ms after which idle keys expire.
-- ARGV[2+3i], ARGV[3+3i], ARGV[4+3i]  cap i's limit, channel and the token
--           to release ("" for none).
--
-- Reply: the number of holders removed.

local now = now_ms(ARGV[1])
local tid = ARGV[2]
local climb, keepMs = tonumber(ARGV[3]), tonumber(ARGV[4])
local removed = 0
for i = 1, #KEYS / 4 do
  local limit, ch, token = tonumber(ARGV[2+3*i]), ARGV[3+3*i], ARGV[4+3*i]
  local changed = purge(i, now)
  if token ~= '' then
    local r = redis.call('ZREM', KEYS[4*i-3], token)
    removed = removed + r
    changed = changed + r
  end
  if tid ~= '' then
    changed = changed + redis.call('ZREM', KEYS[4*i-2], tid)
    redis.call('ZREM', KEYS[4*i-1], tid)
  end
  if changed > 0 then
    wake(i, limit, now, climb, ch, '')
  end
  keep(i, keepMs)
end
return removed
