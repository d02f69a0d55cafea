-- bucket.lua: the helpers every script shares. store_redis.go prepends this
-- file to each script, so each still runs as one atomic call.
--
-- A bucket key holds "tat", "tat rate0 t0 slope until" or "tat rate0 t0
-- slope until hold": its TAT in µs since the Unix epoch (Redis's clock);
-- while the server's feedback holds the bucket below its rule (adapt.go),
-- the adaptation: rate0 units of cost per second at t0 (µs), climbing by
-- slope per second, over at until (µs; 0 when there is none); and while a
-- pause the server asked for lasts (pause.lua), its end, hold (µs), which
-- reserve.lua reports so that every replica sends back its waiters booked
-- before the pause. Integers are written with %d, rates with %.17g. tostring would
-- round to 14 digits; %d is exact (every integer here is below 2^53) and
-- costs less than half of %.0f, which formats a double. Lua 5.1's %d goes
-- through a C long, 64 bits on every 64-bit Redis build (LP64), and
-- miniredis formats an int64.

-- now_us returns the time in µs: Redis's TIME, or arg when a test passes one.
local function now_us(arg)
  if arg == '' then
    local t = redis.call('TIME')
    -- Arithmetic converts the strings as tonumber would, without two calls.
    return t[1] * 1000000 + t[2]
  end
  return tonumber(arg)
end

-- load returns a bucket's TAT, its adaptation (nil when there is none in
-- force at now) and, when the value holds a TAT alone, the TAT as stored, a
-- decimal string ('0' for a missing key: reserve.lua replies with it and
-- need not format the number), and the end of a pause in force at now, or
-- nil.
local function load(key, now)
  local v = redis.call('GET', key)
  if not v then
    return 0, nil, '0'
  end
  -- A TAT alone, the common case, costs one call: tonumber returns nil for
  -- a value with an adaptation or a hold (it has spaces inside).
  local tat = tonumber(v)
  if tat then
    return tat, nil, v
  end
  local r0, t0, slope, untilT, hold
  tat, r0, t0, slope, untilT, hold = string.match(v, '^(%S+) (%S+) (%S+) (%S+) (%S+) ?(%S*)$')
  tat, hold = tonumber(tat) or 0, tonumber(hold)
  if hold and hold <= now then
    hold = nil
  end
  local a = {tonumber(r0), tonumber(t0), tonumber(slope), tonumber(untilT)}
  if not (a[1] and a[2] and a[3] and a[4]) or a[4] <= now then
    return tat, nil, nil, hold
  end
  return tat, a, nil, hold
end

-- interval returns the interval in force at now for a rule of interval iv:
-- slower while adapted, never faster (adaptation.intervalAt in leaky.go).
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

-- save writes a bucket back, with its adaptation and its hold (either may
-- be nil, or over). It expires a second after its TAT, its adaptation and
-- its hold have all passed: a bucket whose TAT has passed equals a new one.
local function save(key, tat, a, now, hold)
  local v
  local last = tat
  local adapted = a and a[4] > now
  if adapted then
    last = math.max(last, a[4])
  end
  if hold and hold > now then
    last = math.max(last, hold)
    if adapted then
      v = string.format('%d %.17g %d %.17g %d %d', tat, a[1], a[2], a[3], a[4], hold)
    else
      v = string.format('%d 0 0 0 0 %d', tat, hold)
    end
  elseif adapted then
    v = string.format('%d %.17g %d %.17g %d', tat, a[1], a[2], a[3], a[4])
  else
    v = string.format('%d', tat)
  end
  redis.call('SET', key, v, 'PX', string.format('%d', math.ceil(math.max(last - now, 0) / 1000) + 1000))
end
