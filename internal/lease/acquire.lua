-- acquire.lua takes one lease in every cap, all or none, for the ticket
-- ARGV[2]: it enqueues (or refreshes) the ticket in every cap's queue, and
-- takes the leases only when the ticket is within the first (cap - held)
-- tickets of every queue. Otherwise the ticket stays, with a fresh expiry.
-- A ticket that was granted its lease (lease.lua's wake) takes that one.
--
-- KEYS      4 per cap, as lease.lua describes.
-- ARGV[1]   now in ms, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]   the ticket id.
-- ARGV[3]   the ticket's effective arrival from an earlier reply, or "" for
--           a new ticket: now - ARGV[4] * ARGV[5].
-- ARGV[4]   the priority, -1, 0 or 1.
-- ARGV[5]   the aging step in ms.
-- ARGV[6]   the TTL in ms of a lease.
-- ARGV[7]   the climb period in ms (lower.lua).
-- ARGV[8]   ms after which idle keys expire.
-- ARGV[9]   "1" to take the leases whatever the caps' state (the Fallback
--           registers with it the leases taken locally while Redis was
--           down), else "".
-- ARGV[10]  the TTL in ms of a ticket, and of a grant not yet taken.
-- ARGV[9+2i], ARGV[10+2i]  cap i's limit and channel.
--
-- Reply: {1, ttl, token_1, ..., token_n} when taken; {0, score, net,
-- blocked} when waiting: the score to pass back as ARGV[3], the ms until
-- the earliest event that may let the ticket in without a message (a
-- holder's or ticket's expiry, a climb of the cap; at most the TTL), and
-- the index of the first cap the ticket could not take.

local now = now_ms(ARGV[1])
local tid = ARGV[2]
local score = tonumber(ARGV[3]) or (now - tonumber(ARGV[4]) * tonumber(ARGV[5]))
local ttl, climb, keepMs = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local force = ARGV[9] == '1'
local life = tonumber(ARGV[10])
local n = #KEYS / 4
if n == 1 then
  local g = granted(1, tid, now)
  if g then
    forget(1, tid)
    redis.call('ZADD', KEYS[1], now + ttl, g)
    keep(1, keepMs)
    return {1, ttl, tonumber(g)}
  end
end
local blocked = 0
local net = now + ttl
local purged = {}
for i = 1, n do
  local limit = tonumber(ARGV[9+2*i])
  local h, q, x = KEYS[4*i-3], KEYS[4*i-2], KEYS[4*i-1]
  purged[i] = purge(i, now)
  redis.call('HDEL', KEYS[4*i], 'g:' .. tid) -- a grant that expired
  redis.call('ZADD', q, score, tid)
  redis.call('ZADD', x, now + life, tid)
  local c, change = cap(i, limit, now, climb)
  local rank = redis.call('ZRANK', q, tid)
  if blocked == 0 and rank >= c - redis.call('ZCARD', h) then
    blocked = i
  end
  for _, t in ipairs({earliest(h), earliest(x), change}) do
    if t and t > now and t < net then
      net = t
    end
  end
end

local reply
if blocked == 0 or force then
  reply = {1, ttl}
  for i = 1, n do
    local h, q, x = KEYS[4*i-3], KEYS[4*i-2], KEYS[4*i-1]
    redis.call('ZREM', q, tid)
    redis.call('ZREM', x, tid)
    local t = token(i, now)
    redis.call('ZADD', h, now + ttl, string.format('%d', t))
    reply[#reply + 1] = t
  end
else
  reply = {0, score, net - now, blocked}
end
for i = 1, n do
  if purged[i] > 0 then
    wake(i, tonumber(ARGV[9+2*i]), now, climb, ARGV[10+2*i], tid, life)
  end
  keep(i, keepMs)
end
return reply
