-- renew.lua is one renewal round of a store: it extends its holders'
-- expiry by the lease TTL and its tickets' (and their grants') by the
-- ticket TTL, reports those Redis no longer knows, and reports which of
-- its tickets may now acquire or were granted their lease, so that a
-- waiter whose message was lost still wakes. Expired holders and tickets
-- it purges wake the waiters of other stores by message.
--
-- KEYS      4 per cap, as lease.lua describes.
-- ARGV[1]   now in ms, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]   the TTL in ms of a lease.
-- ARGV[3]   the climb period in ms (lower.lua).
-- ARGV[4]   ms after which idle keys expire.
-- ARGV[5]   the TTL in ms of a ticket.
-- Then, for each cap in KEYS order: its limit, channel, the number of
-- tokens t, t tokens, the number of tickets k, k ticket ids.
--
-- Reply: {net, {lost tokens, lost tickets, eligible tickets} per cap}: net
-- is the ms until the earliest expiry or climb among the caps (at most the
-- TTL); each inner list is an array of strings.

local now = now_ms(ARGV[1])
local ttl, climb, keepMs, life = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local net = now + ttl
local reply = {0}
local a = 6
for i = 1, #KEYS / 4 do
  local h, q, x = KEYS[4*i-3], KEYS[4*i-2], KEYS[4*i-1]
  local limit, ch = tonumber(ARGV[a]), ARGV[a+1]
  a = a + 2
  local purged = purge(i, now)
  local lostTokens, lostTickets, eligible = {}, {}, {}
  local t = tonumber(ARGV[a])
  a = a + 1
  for j = a, a + t - 1 do
    if redis.call('ZADD', h, 'XX', 'CH', now + ttl, ARGV[j]) == 0 and not redis.call('ZSCORE', h, ARGV[j]) then
      lostTokens[#lostTokens + 1] = ARGV[j]
    end
  end
  a = a + t
  local k = tonumber(ARGV[a])
  a = a + 1
  local c, change = cap(i, limit, now, climb)
  local room = c - redis.call('ZCARD', h)
  for j = a, a + k - 1 do
    local g = granted(i, ARGV[j], now)
    if redis.call('ZADD', x, 'XX', 'CH', now + life, ARGV[j]) == 0 and not redis.call('ZSCORE', x, ARGV[j]) then
      lostTickets[#lostTickets + 1] = ARGV[j]
    elseif g then
      -- Granted, and the message lost: keep the grant for the waiter.
      if tonumber(redis.call('ZSCORE', h, g)) < now + life then
        redis.call('ZADD', h, now + life, g) -- never shorten a taken lease
      end
      eligible[#eligible + 1] = ARGV[j]
    else
      local r = redis.call('ZRANK', q, ARGV[j])
      if r and r < room then
        eligible[#eligible + 1] = ARGV[j]
      end
    end
  end
  a = a + k
  for _, e in ipairs({earliest(h), earliest(x), change}) do
    if e and e > now and e < net then
      net = e
    end
  end
  if purged > 0 then
    wake(i, limit, now, climb, ch, '', life)
  end
  keep(i, keepMs)
  reply[#reply + 1] = {lostTokens, lostTickets, eligible}
end
reply[1] = net - now
return reply
