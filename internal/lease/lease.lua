-- lease.lua: the helpers every lease script shares. redis.go prepends this
-- file to each script, so each still runs as one atomic call.
--
-- A cap key K ("throttle:{ns}:lease:" .. Cap.Key) has four keys, which every
-- script takes as KEYS[4i-3] .. KEYS[4i] for its i-th cap, in this order:
--   K:h  ZSET of the holders: member a fencing token, score its expiry.
--   K:q  ZSET of the waiting tickets: member a ticket id, score its
--        effective arrival, enqueue time - priority * aging step.
--   K:x  ZSET of the same tickets, scored by their expiry.
--   K:s  HASH: fence, the last fencing token; low and lowAt, the cap the
--        server's refusal lowered it to and when (lower.lua); others and
--        othersUntil, the server's count of requests not ours and until
--        when it holds (lower.lua's observe).
-- Every key shares the namespace's {hash tag}. Times are ms since the Unix
-- epoch on Redis's clock, exact in Lua doubles. A waiter's channel is
-- K:ch, passed in ARGV (a channel is not a key); a message on it is the
-- space-separated ids of the tickets that may now acquire.

-- now_ms returns the time in ms: Redis's TIME, or arg when a test passes one.
local function now_ms(arg)
  if arg == '' then
    local t = redis.call('TIME')
    return t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return tonumber(arg)
end

-- purge removes cap i's expired holders and tickets and returns how many.
local function purge(i, now)
  local h, q, x = KEYS[4*i-3], KEYS[4*i-2], KEYS[4*i-1]
  local n = redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
  local dead = redis.call('ZRANGEBYSCORE', x, '-inf', now)
  for j = 1, #dead do
    redis.call('ZREM', q, dead[j])
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', x, '-inf', now)
  end
  return n + #dead
end

-- cap returns cap i's effective cap at now, for a configured limit and a
-- climb of one per climb ms, and the time it next changes, or nil.
local function cap(i, limit, now, climb)
  local v = redis.call('HMGET', KEYS[4*i], 'low', 'lowAt', 'others', 'othersUntil')
  local c, change = limit, nil
  local low, at = tonumber(v[1]), tonumber(v[2])
  if low and at then
    local steps = math.floor((now - at) / climb)
    if low + steps < c then
      c = low + steps
      change = at + (steps + 1) * climb
    end
  end
  local others, untilT = tonumber(v[3]), tonumber(v[4])
  if others and untilT and untilT > now and limit - others < c then
    c = limit - others
    if not change or untilT < change then
      change = untilT
    end
  end
  if c < 1 then
    c = 1
  end
  return c, change
end

-- free returns how many more leases cap i may grant at now.
local function free(i, limit, now, climb)
  local c = cap(i, limit, now, climb)
  return c - redis.call('ZCARD', KEYS[4*i-3])
end

-- wake publishes on ch the tickets of cap i that may now acquire, the first
-- (cap - held) of its queue, leaving out skip (the caller's own ticket).
local function wake(i, limit, now, climb, ch, skip)
  local n = free(i, limit, now, climb)
  if n <= 0 then
    return
  end
  if n > 64 then
    n = 64
  end
  local ids = redis.call('ZRANGE', KEYS[4*i-2], 0, n - 1)
  local out = {}
  for j = 1, #ids do
    if ids[j] ~= skip then
      out[#out + 1] = ids[j]
    end
  end
  if #out > 0 then
    redis.call('PUBLISH', ch, table.concat(out, ' '))
  end
end

-- earliest returns the smallest score of zset key, or nil.
local function earliest(key)
  local r = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if r[2] then
    return tonumber(r[2])
  end
  return nil
end

-- keep makes cap i's keys expire keep ms after this call.
local function keep(i, ms)
  for j = 4*i-3, 4*i do
    redis.call('PEXPIRE', KEYS[j], ms)
  end
end
