-- bucket.lua: the helpers every script shares. store_redis.go prepends this
-- file to each script, so each still runs as one atomic call.
--
-- A bucket key holds "tat" alone, or "tat rate0 t0 slope until hold n
-- paid": its
-- TAT in µs since the Unix epoch (Redis's clock); while the server's answers
-- are read into the bucket (limit.lua, internal/feedback), its cap: rate0 units
-- of cost per second at t0 (µs), climbing by slope per second, over at until
-- (µs; rate0 0 caps nothing, the bucket is only counted); the end of a pause
-- the server asked for (pause.lua), hold (µs, 0 when none), which
-- reserve.lua reports so that every replica sends back its waiters booked
-- before the pause; and n, 1 plus the units of cost the replicas reported
-- sent since the cap began (reserve.lua), which every reservation reports
-- so that a replica can tell how much the fleet itself sent in the
-- server's window; and paid, the debt (store.Cap.Debt) the count has
-- already paid by pushing the TAT (limit.lua; a value written without it
-- reads as 0; fields after it, which a version of 2026-12-04 wrote, are
-- read past). Integers are written with %d,
-- rates with %.17g. tostring would round to 14 digits; %d is exact (every
-- integer here is below 2^53) and costs less than half of %.0f, which
-- formats a double. Lua 5.1's %d goes through a C long, 64 bits on every
-- 64-bit Redis build (LP64), and miniredis formats an int64.

-- now_us returns the time in µs: Redis's TIME, or arg when a test passes one.
local function now_us(arg)
  if arg == '' then
    local t = redis.call('TIME')
    -- Arithmetic converts the strings as tonumber would, without two calls.
    return t[1] * 1000000 + t[2]
  end
  return tonumber(arg)
end

-- load returns a bucket's TAT, its cap (nil when there is none in force at
-- now) and, when the value holds a TAT alone, the TAT as stored, a decimal
-- string ('0' for a missing key: reserve.lua replies with it and need not
-- format the number), the end of a pause in force at now, or nil, and the
-- units counted under the cap (0 without one).
local function load(key, now)
  local v = redis.call('GET', key)
  if not v then
    return 0, nil, '0', nil, 0
  end
  -- A TAT alone, the common case, costs one call: tonumber returns nil for
  -- a value with a cap or a hold (it has spaces inside).
  local tat = tonumber(v)
  if tat then
    return tat, nil, v, nil, 0
  end
  local r0, t0, slope, untilT, hold, n, paid
  tat, r0, t0, slope, untilT, hold, n, paid = string.match(v, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) ?(%S*)')
  tat, hold = tonumber(tat) or 0, tonumber(hold)
  if hold and hold <= now then
    hold = nil
  end
  local a = {tonumber(r0), tonumber(t0), tonumber(slope), tonumber(untilT), tonumber(paid) or 0}
  if not (a[1] and a[2] and a[3] and a[4]) or a[4] <= now then
    return tat, nil, nil, hold, 0
  end
  return tat, a, nil, hold, tonumber(n) or 0
end

-- interval returns the interval in force at now for a rule of interval iv:
-- slower while capped, never faster (rateCap.intervalAt in internal/localstore).
local function interval(iv, a, now)
  if not a or now >= a[4] then
    return iv
  end
  local rate = a[1] + a[3] * (now - a[2]) / 1000000
  if rate <= 0 then
    return iv
  end
  return math.max(iv, math.ceil(1000000 / rate))
end

-- save writes a bucket back, with its cap, its hold (either may be nil, or
-- over) and the units counted under the cap. It expires a second after its
-- TAT, its cap and its hold have all passed: a bucket whose TAT has passed
-- equals a new one.
local function save(key, tat, a, now, hold, n)
  local v
  local last = tat
  local capped = a and a[4] > now
  if capped then
    last = math.max(last, a[4])
  end
  local held = hold and hold > now
  if held then
    last = math.max(last, hold)
  end
  if capped then
    v = string.format('%d %.17g %d %.17g %d %d %d %.17g', tat, a[1], a[2], a[3], a[4], held and hold or 0, n or 0, a[5] or 0)
  elseif held then
    v = string.format('%d 0 0 0 0 %d 0', tat, hold)
  else
    v = string.format('%d', tat)
  end
  redis.call('SET', key, v, 'PX', string.format('%d', math.ceil(math.max(last - now, 0) / 1000) + 1000))
end

-- A leaky or token bucket's credit lives beside it, at creditKey: the key
-- with "throttle:" replaced by "throttle:c:" (as window.lua's envelope, in
-- the bucket's Cluster slot). It holds "k e": k units of cost refunded
-- while the bucket had requests booked ahead (charge.lua), usable at t as
-- long as k ≤ (e − t) / interval, e being the latest mark (a booking's TAT
-- after it) of a refunded request: see internal/localstore's credit.go for
-- why that bound, and charge.lua and reserve.lua for its use.
local function creditKey(key)
  return 'throttle:c:' .. string.sub(key, 10)
end

-- lateness returns the lateness tolerance in µs that reserve.lua's
-- argument x carries: x itself, or −1 − x for a bucket that can hold a
-- credit (x < 0).
local function lateness(x)
  if x < 0 then
    return -1 - x
  end
  return x
end

-- loadCredit returns key's credit as stored: its units and its mark (µs),
-- or 0, 0 when there is none.
local function loadCredit(key)
  local v = redis.call('GET', creditKey(key))
  if not v then
    return 0, 0
  end
  local k, e = string.match(v, '^(%S+) (%S+)$')
  return tonumber(k) or 0, tonumber(e) or 0
end

-- creditAt returns the units of a credit of k units and mark e that are
-- whole at t for interval iv (µs): at most (e − t) / iv.
local function creditAt(k, e, t, iv)
  if e - t < iv then
    return 0
  end
  return math.min(k, math.floor((e - t) / iv))
end

-- saveCredit writes key's credit of k units and mark e; it expires once it
-- has lapsed, after e − iv. A credit of nothing is written as "0 0" for a
-- millisecond rather than deleted: the ACL of REDIS.md grants no DEL.
local function saveCredit(key, k, e, now, iv)
  local ck = creditKey(key)
  if k < 1 or e - now < iv then
    redis.call('SET', ck, '0 0', 'PX', 1)
    return
  end
  redis.call('SET', ck, string.format('%d %d', k, e), 'PX', string.format('%d', math.floor((e - iv - now) / 1000) + 1))
end

-- takeCredit lets a request of cost that would queue in the bucket at key
-- (interval iv in force, x its lateness argument to reserve.lua) take the
-- bucket's credit (charge.lua): when the bucket can hold one (x < 0) and
-- the credit covers the cost still at the latest the request may reach the
-- server, its lateness after now, it spends the cost and returns the
-- credit's mark, the request's own; otherwise nil.
local function takeCredit(key, x, cost, iv, now)
  if x >= 0 then
    return nil
  end
  local k, e = loadCredit(key)
  if creditAt(k, e, now + lateness(x), iv) < cost then
    return nil
  end
  saveCredit(key, creditAt(k, e, now, iv) - cost, e, now, iv)
  return e
end
