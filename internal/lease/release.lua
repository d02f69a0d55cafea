-- release.lua gives leases back and withdraws a ticket (and the lease it
-- was granted, if it was), then hands the freed slots on (lease.lua's
-- wake: it grants them to the head tickets of one cap and publishes on
-- each cap's channel the tickets that may now acquire). A token that is no
-- longer a holder (it expired, and someone else may hold the slot) frees
-- nothing.
--
-- KEYS      4 per cap, as lease.lua describes.
-- ARGV[1]   now in ms, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]   a ticket id to withdraw from every cap's queue, or "".
-- ARGV[3]   the climb period in ms (lower.lua).
-- ARGV[4]   ms after which idle keys expire.
-- ARGV[5]   the TTL in ms of a ticket, which a grant takes.
-- ARGV[3+3i], ARGV[4+3i], ARGV[5+3i]  cap i's limit, channel and the token
--           to release ("" for none).
--
-- Reply: {removed, grant...}: the number of holders removed (given back
-- tokens, not withdrawn grants), then the grants made, "id:token" each.

local now = now_ms(ARGV[1])
local tid = ARGV[2]
local climb, keepMs, life = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local removed = 0
local reply = {0}
for i = 1, #KEYS / 4 do
  local limit, ch, tok = tonumber(ARGV[3+3*i]), ARGV[4+3*i], ARGV[5+3*i]
  local changed = purge(i, now)
  if tok ~= '' then
    local r = redis.call('ZREM', KEYS[4*i-3], tok)
    removed = removed + r
    changed = changed + r
  end
  if tid ~= '' then
    changed = changed + redis.call('ZREM', KEYS[4*i-2], tid)
    local g = redis.call('HGET', KEYS[4*i], 'g:' .. tid)
    if g then
      changed = changed + redis.call('ZREM', KEYS[4*i-3], g)
    end
    forget(i, tid)
  end
  if changed > 0 then
    for _, g in ipairs(wake(i, limit, now, climb, ch, '', life)) do
      reply[#reply + 1] = g
    end
  end
  keep(i, keepMs)
end
reply[1] = removed
return reply
