-- window.lua: the window algorithms (internal/algorithm, in integer µs:
-- FixedAt, CounterAt, LogAt and their bookings, step for step), and the
-- envelope that carries their pause, cap and count. store.go prepends it,
-- after bucket.lua, to every script that touches a bucket.
--
-- Algorithm codes (store.Algorithm): 0 leaky bucket, 1 token bucket (both
-- a TAT in the bucket's own key, see bucket.lua), 2 fixed window, 3 sliding
-- log, 4 sliding counter.
--
-- A fixed window's or sliding counter's key holds "last first c0 c1 ...":
-- the latest departure booked (µs), the start of the first window kept
-- (µs) and the units of cost booked in it and the windows after it, one
-- Period apart. A sliding log's key is a sorted set with one member per
-- unit of cost, "t:i" scored t (its departure, µs; i numbers the members
-- at t from 1). Its entries at or before now - Period are trimmed on every
-- booking, and it keeps only its newest quota members (logBook), so it
-- never holds more than the quota, however far ahead waiters book.
--
-- The envelope of a window bucket lives beside it, at envKey: the key with
-- "throttle:" replaced by "throttle:e:" (no bucket key starts so; the hash
-- tag is the bucket's, so it lives in the same Cluster slot). It is
-- bucket.lua's "tat rate0 t0 slope until hold n": tat is the TAT of the
-- cap's own GCRA constraint (burst 1, at the cap's interval while that is
-- slower than the rule's Period/Rate), hold the end of the last pause
-- (kept until two Periods after it: a pause weighs on the windows after
-- it),
-- n the count under the cap. It exists only while a cap or a pause is in
-- force, so a bucket never capped nor paused costs one GET of a missing
-- key for it.
--
-- The functions are made by windowLib, which a script calls only when a
-- request has a window bucket: a script's top level makes its local
-- functions anew on every call, and the leaky bucket's fast path should not
-- pay for a dozen closures it never calls.

local function windowLib()
  -- fdiv returns floor(a / b) exactly for integers |a| < 2^53, b > 0: a
  -- double's division may round across an integer.
  local function fdiv(a, b)
    local q = math.floor(a / b)
    if q * b > a then
      q = q - 1
    elseif (q + 1) * b <= a then
      q = q + 1
    end
    return q
  end

  -- wstart returns the start of the window holding t.
  local function wstart(t, p, anchor)
    local d = t - anchor
    return t - (d - fdiv(d, p) * p)
  end

  local function envKey(key)
    return 'throttle:e:' .. string.sub(key, 10)
  end

  -- loadEnv returns a window bucket's envelope: {tat, cap or nil, hold (0
  -- for none), n, raw}; the cap as bucket.lua's load returns it, nil unless
  -- in force at now.
  local function loadEnv(ek, now)
    local v = redis.call('GET', ek)
    if not v then
      return {0, nil, 0, 0, false}
    end
    local tat, r0, t0, slope, untilT, hold, n = string.match(v, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
    local a = {tonumber(r0), tonumber(t0), tonumber(slope), tonumber(untilT)}
    if not (a[1] and a[2] and a[3] and a[4]) or a[4] <= now then
      a, n = nil, 0
    end
    return {tonumber(tat) or 0, a, tonumber(hold) or 0, tonumber(n) or 0, true}
  end

  -- saveEnv writes a window bucket's envelope back while a cap is in force
  -- or its pause may still weigh (until two Periods after it: a sliding
  -- counter's window after the pause counts the one before as full).
  local function saveEnv(ek, e, now, p)
    local a, hold = e[2], e[3]
    local capped = a and a[4] > now
    local last = 0
    if capped then
      last = math.max(last, a[4], e[1])
    end
    if hold > 0 and hold + 2 * p > now then
      last = math.max(last, hold + 2 * p)
    else
      hold = 0
    end
    if last <= now then
      -- Nothing to keep: the envelope in Redis, if any, weighs no more and
      -- expires on its own (no DEL: the documented ACL grants none).
      return
    end
    local v
    if capped then
      v = string.format('%d %.17g %d %.17g %d %d %d', e[1], a[1], a[2], a[3], a[4], hold, e[4])
    else
      v = string.format('%d 0 0 0 0 %d 0', e[1], hold)
    end
    redis.call('SET', ek, v, 'PX', string.format('%d', math.ceil((last - now) / 1000) + 1000))
  end

  -- capInterval returns the interval of a cap in force that is slower than
  -- a rule of interval iv, or nil (the cap then adds no constraint).
  local function capInterval(a, iv, now)
    if not a or now >= a[4] then
      return nil
    end
    local rate = a[1] + a[3] * (now - a[2]) / 1000000
    if rate <= 0 then
      return nil
    end
    local civ = math.ceil(1000000 / rate)
    if civ > iv then
      return civ
    end
    return nil
  end

  -- Counts: {last, first, {c0, c1, ...}} (algorithm.Counts).
  local function loadCounts(key)
    local v = redis.call('GET', key)
    local c = {0, 0, {}}
    if not v then
      return c
    end
    local i = 0
    for f in string.gmatch(v, '%S+') do
      i = i + 1
      if i == 1 then
        c[1] = tonumber(f)
      elseif i == 2 then
        c[2] = tonumber(f)
      else
        c[3][i - 2] = tonumber(f)
      end
    end
    return c
  end

  local function countGet(c, p, s)
    local n = #c[3]
    if n == 0 or s < c[2] then
      return 0
    end
    return c[3][(s - c[2]) / p + 1] or 0
  end

  -- countAdd adds n (≥ 1; refunds go through countSub) to the window
  -- starting at s ≥ c's first when it has any.
  local function countAdd(c, p, s, n)
    local w = c[3]
    if #w == 0 then
      c[2] = s
    end
    if s < c[2] then
      local k = (c[2] - s) / p
      local moved = {}
      for i = 1, k do
        moved[i] = 0
      end
      for i = 1, #w do
        moved[k + i] = w[i]
      end
      c[3], c[2], w = moved, s, moved
    end
    local i = (s - c[2]) / p + 1
    for j = #w + 1, i do
      w[j] = 0
    end
    w[i] = w[i] + n
  end

  -- countSub takes n back from the window starting at s, if it is still
  -- kept (algorithm.Counts.Add with a negative n).
  local function countSub(c, p, s, n)
    local w = c[3]
    if #w == 0 or s < c[2] then
      return false
    end
    local i = (s - c[2]) / p + 1
    if not w[i] then
      return false
    end
    w[i] = math.max(w[i] - n, 0)
    return true
  end

  -- countTrim drops the windows starting before from, and trailing empty
  -- ones (algorithm.Counts.Trim).
  local function countTrim(c, p, from)
    local w = c[3]
    if #w > 0 and c[2] < from then
      local k = math.min((from - c[2]) / p, #w)
      local kept = {}
      for i = k + 1, #w do
        kept[i - k] = w[i]
      end
      c[3], c[2], w = kept, c[2] + k * p, kept
    end
    while #w > 0 and w[#w] == 0 do
      w[#w] = nil
    end
  end

  -- saveCounts writes c back, expiring as soon as the state equals a new
  -- one: keep (one Period for the sliding counter, whose previous window
  -- counts) after the end of its last window, and not before its latest
  -- departure.
  local function saveCounts(key, c, p, now, keep)
    local w = c[3]
    if #w == 0 then
      return -- the key, if any, holds only windows past use, and expires
    end
    local parts = {string.format('%d %d', c[1], c[2])}
    for i = 1, #w do
      parts[i + 1] = string.format('%d', w[i])
    end
    local last = math.max(c[2] + #w * p + keep, c[1])
    redis.call('SET', key, table.concat(parts, ' '), 'PX', string.format('%d', math.ceil(math.max(last - now, 0) / 1000) + 1000))
  end

  -- fixedAt is algorithm.FixedAt (edge is the Window's Edge).
  local function fixedAt(c, p, q, anchor, edge, floor, hold, cost)
    local t = math.max(floor, hold)
    if hold > 0 and wstart(t, p, anchor) < hold then
      t = wstart(t, p, anchor) + p
    end
    while true do
      local s = wstart(t, p, anchor)
      t = math.max(t, s + edge)
      if t < s + p - edge and countGet(c, p, s) + cost <= q then
        return t
      end
      t = s + p
    end
  end

  -- counterAt is algorithm.CounterAt (edge is the Window's Edge).
  local function counterAt(c, p, q, edge, floor, hold, cost)
    local t = math.max(floor, c[1], hold)
    while true do
      local s = wstart(t, p, 0)
      t = math.max(t, s + edge)
      local cur = countGet(c, p, s)
      if s < hold then
        cur = q
      end
      if t >= s + p - edge or cur + cost > q then
        t = s + p
      else
        local prev = countGet(c, p, s - p)
        if s - p < hold then
          prev = q
        end
        if prev == 0 then
          return t
        end
        local at = s + p - fdiv((q - cur - cost) * p, prev)
        if at > t then
          t = at
        end
        if t < s + p - edge then
          return t
        end
        t = s + p
      end
    end
  end

  -- logAt is algorithm.LogAt on the sorted set key, trimmed at now.
  local function logAt(key, p, q, floor, hold, cost, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - p))
    local n = redis.call('ZCARD', key)
    local t = math.max(floor, hold)
    if n > 0 then
      t = math.max(t, tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]))
    end
    if hold == 0 or t >= hold + p then
      local k = n - q + cost
      if k > 0 then
        local e = tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
        t = math.max(t, e + p)
      end
      return t
    end
    local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    local e = {}
    local j = 0
    for i = 2, #all, 2 do
      e[i / 2] = tonumber(all[i])
      if e[i / 2] <= t - p then
        j = i / 2
      end
    end
    while j <= n do
      local lo = t
      if j > 0 then
        lo = math.max(lo, e[j] + p)
      end
      local left = q - cost - (n - j)
      if left >= 0 then
        local at = math.max(lo, hold - fdiv(-(q - left) * p, q))
        if j == n or at < e[j + 1] + p then
          return at
        end
      end
      j = j + 1
    end
    return t
  end

  -- logTrimRank keeps the newest q members of the sorted set key
  -- (algorithm.LogBook says why the older ones decide nothing). Members at
  -- one score are cut highest-numbered first, so the members at t stay
  -- numbered 1..m, as logBook and logRefund number them.
  local function logTrimRank(key, q)
    local x = redis.call('ZCARD', key) - q
    if x <= 0 then
      return
    end
    local s = redis.call('ZRANGE', key, x - 1, x - 1, 'WITHSCORES')[2]
    local ss = string.format('%d', tonumber(s))
    local below = redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. ss)
    local m = redis.call('ZCOUNT', key, ss, ss)
    local gone = {}
    for i = m - (x - below) + 1, m do
      gone[#gone + 1] = ss .. ':' .. string.format('%d', i)
    end
    if #gone > 0 then
      redis.call('ZREM', key, unpack(gone))
    end
  end

  -- logAdd adds cost members at t (string), numbered after those there.
  local function logAdd(key, ts, cost)
    local k = redis.call('ZCOUNT', key, ts, ts)
    local i = 0
    while i < cost do
      local args = {}
      for m = 1, math.min(cost - i, 500) do
        args[2 * m - 1] = ts
        args[2 * m] = ts .. ':' .. string.format('%d', k + i + m)
      end
      redis.call('ZADD', key, unpack(args))
      i = i + math.min(cost - i, 500)
    end
  end

  -- logBook adds cost members at t (≥ every entry), keeps the newest q
  -- and expires the log a second after its last entry leaves the window
  -- (algorithm.LogBook).
  local function logBook(key, p, q, t, cost, now)
    logAdd(key, string.format('%d', t), cost)
    logTrimRank(key, q)
    redis.call('PEXPIRE', key, string.format('%d', math.ceil((t + p - now) / 1000) + 1000))
  end

  -- logRefund gives back up to cost members at t, the highest-numbered, so
  -- the members at t stay numbered 1..m; a log of q members moves them to
  -- its oldest member's score instead of removing them, and keeps them
  -- where they are when that is t (algorithm.LogRefund says why). It
  -- returns whether it gave any back.
  local function logRefund(key, p, q, now, t, cost)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - p))
    logTrimRank(key, q)
    local full = redis.call('ZCARD', key) == q
    local ts = string.format('%d', t)
    local m = redis.call('ZCOUNT', key, ts, ts)
    local gone = {}
    for i = math.max(m - cost + 1, 1), m do
      gone[#gone + 1] = ts .. ':' .. string.format('%d', i)
    end
    if #gone == 0 then
      return false
    end
    local oldest = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
    if full and oldest == t then
      return false -- moved to the oldest, they would stay where they are
    end
    redis.call('ZREM', key, unpack(gone))
    if full then
      logAdd(key, string.format('%d', oldest), #gone)
    end
    return true
  end

  return {
    wstart = wstart,
    envKey = envKey,
    loadEnv = loadEnv,
    saveEnv = saveEnv,
    capInterval = capInterval,
    loadCounts = loadCounts,
    countGet = countGet,
    countAdd = countAdd,
    countSub = countSub,
    countTrim = countTrim,
    saveCounts = saveCounts,
    fixedAt = fixedAt,
    counterAt = counterAt,
    logAt = logAt,
    logBook = logBook,
    logRefund = logRefund,
  }
end
