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
--        when it holds (lower.lua's observe); "g:" .. ticket id, the token
--        of a lease granted to that ticket (see wake), which lives as long
--        as the ticket's entry in K:x.
-- Every key shares the namespace's {hash tag}. Times are ms since the Unix
-- epoch on Redis's clock, exact in Lua doubles. A waiter's channel is
-- K:ch, passed in ARGV (a channel is not a key); a message on it is the
-- space-separated ids of the tickets that may now acquire, each followed
-- by ":" and a token when the ticket was granted its lease (see wake).
--
-- A ticket id ends in "/" and the number of caps of its request (redis.go
-- makes them so): only a ticket of one cap ("/1") is granted by wake, since
-- granting one cap of a ticket that needs several would break all or none.

-- now_ms returns the time in ms: Redis's TIME, or arg when a test passes one.
local function now_ms(arg)
  if arg == '' then
    local t = redis.call('TIME')
    return t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return tonumber(arg)
end

-- purge removes cap i's expired holders and tickets and returns how many
-- slots and queue places that freed.
local function purge(i, now)
  local h, q, x = KEYS[4*i-3], KEYS[4*i-2], KEYS[4*i-1]
  local n = redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
  local dead = redis.call('ZRANGEBYSCORE', x, '-inf', now)
  for j = 1, #dead do
    -- A granted ticket is in K:x only, for its grant record: its expiry
    -- frees no queue place.
    n = n + redis.call('ZREM', q, dead[j])
    redis.call('HDEL', KEYS[4*i], 'g:' .. dead[j])
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', x, '-inf', now)
  end
  return n
end

-- token returns a fresh fencing token of cap i.
local function token(i, now)
  -- A fence made afresh (after the key expired or Redis restarted) starts
  -- at now in µs, above every token granted before at under 1000 per ms.
  -- Written with %d (exact below 2^53), so that the fence and the holder
  -- members are plain decimal integers, as Go formats the tokens it
  -- sends back, whatever format a Redis version gives a Lua number.
  redis.call('HSETNX', KEYS[4*i], 'fence', string.format('%d', now * 1000))
  return redis.call('HINCRBY', KEYS[4*i], 'fence', 1)
end

-- grantable reports whether ticket tid is of a request with one cap.
local function grantable(tid)
  return string.sub(tid, -2) == '/1'
end

-- granted returns the token granted to ticket tid under cap i if that
-- lease is still held at now, else nil.
local function granted(i, tid, now)
  local g = redis.call('HGET', KEYS[4*i], 'g:' .. tid)
  if not g then
    return nil
  end
  local at = tonumber(redis.call('ZSCORE', KEYS[4*i-3], g))
  if at and at > now then
    return g
  end
  return nil
end

-- forget removes ticket tid's grant record under cap i, if any, and its
-- entry in K:x.
local function forget(i, tid)
  redis.call('HDEL', KEYS[4*i], 'g:' .. tid)
  redis.call('ZREM', KEYS[4*i-1], tid)
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

-- wake hands cap i's free slots to the first (cap - held) tickets of its
-- queue, leaving out skip (the caller's own ticket): a ticket of one cap
-- is granted its lease at once (a holder with a fresh token, recorded
-- under "g:" .. id in K:s, its queue place removed); the others may now
-- acquire. A grant expires with its ticket, but not within life / 3 ms,
-- the ticket renewal interval, in which the waiter's store renews it: so
-- a grant to a crashed waiter holds its slot little longer than the
-- ticket would have held its queue place. It publishes them all on ch, "id:token" for a grant, and
-- returns the grants, as "id:token" strings.
local function wake(i, limit, now, climb, ch, skip, life)
  local n = free(i, limit, now, climb)
  if n <= 0 then
    return {}
  end
  if n > 64 then
    n = 64
  end
  local h, q, x = KEYS[4*i-3], KEYS[4*i-2], KEYS[4*i-1]
  local ids = redis.call('ZRANGE', q, 0, n - 1)
  local out, grants = {}, {}
  for j = 1, #ids do
    local id = ids[j]
    if id ~= skip then
      if grantable(id) then
        local t = string.format('%d', token(i, now))
        local at = now + math.floor(life / 3)
        local exp = tonumber(redis.call('ZSCORE', x, id))
        if exp and exp > at then
          at = exp
        end
        redis.call('ZADD', h, at, t)
        redis.call('ZREM', q, id)
        redis.call('ZADD', x, at, id)
        redis.call('HSET', KEYS[4*i], 'g:' .. id, t)
        id = id .. ':' .. t
        grants[#grants + 1] = id
      end
      out[#out + 1] = id
    end
  end
  if #out > 0 then
    redis.call('PUBLISH', ch, table.concat(out, ' '))
  end
  return grants
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
