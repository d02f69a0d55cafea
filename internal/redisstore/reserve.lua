-- reserve.lua defines reserve, which books one slot for a request in every
-- bucket it needs, all or nothing (GCRA, see the root's leaky.go: this is
-- internal/localstore's Store.Reserve in integer microseconds). The request
-- departs at the latest of its earliest times in its buckets. Each bucket is booked at the
-- request's earliest time in it, unless that comes before the departure by
-- more than the bucket's lateness tolerance: such a bucket is deferred (not
-- booked; the caller books it at the departure, see reservation.deferred).
-- store_redis.go prepends bucket.lua and heartbeat.lua, and appends the
-- main chunk: reserve_call.lua (one request) or reserve_batch.lua (the
-- requests of one pipeline, see batch.go).
--
-- A request's keys are KEYS[k+1] … KEYS[k+nk] and its arguments
-- ARGV[a+1] … ARGV[a+na]; every key of a call shares one {hash tag}:
-- KEYS[k+i]  bucket i's key.
-- ARGV[a+1]  maxWait: the longest wait in µs the request accepts; a
--            negative one books nothing and only reports the wait.
-- ARGV[a+2]  floor: the earliest departure in µs after now (0 unless the
--            request's buckets are split over several calls).
-- ARGV[a+5i-2] … ARGV[a+5i+2]   bucket i's rule interval in µs (≥ 1),
--            burst, cost (1 ≤ cost ≤ burst), lateness tolerance in µs
--            (≥ 0), and the units of cost this replica sent in the bucket
--            since it last reported them (≥ 0), added to the bucket's count
--            while it is counted (see bucket.lua) and the request booked.
--
-- Heartbeat (at most once per interval per replica, see heartbeat.lua):
-- when na == 5·nk - 1, the request's last key is the namespace's replica set
-- (it shares the buckets' {hash tag}) and its last two arguments are this
-- replica's id and TTL in µs. The replica is registered before the
-- buckets are looked at, whether or not the request is booked, and the
-- count of live replicas follows limiter in the reply.
--
-- Reply: one string of decimal integers separated by spaces (one bulk
-- string costs the client fewer allocations than an array of integers):
--   "ok wait limiter [live] held prev_1 booked_1 n_1 ... prev_n booked_n n_n"
--   ok       1 if booked, 0 if the wait exceeds maxWait (nothing booked; the
--            reply then stops after held).
--   wait     µs from now until departure: relative, so that the callers'
--            clocks never matter.
--   limiter  0-based index of the bucket that set the wait.
--   live     only with a heartbeat: the live replicas, this one included.
--   held     µs from now until the latest end of a pause in force in the
--            request's buckets (their hold, see pause.lua), or 0.
--   prev_i, booked_i  bucket i's TAT (µs) before and after the booking, for
--            refund.lua; both 0 for a deferred bucket.
--   n_i      bucket i's count (see bucket.lua): 1 plus the units the
--            fleet has reported sent in it since it was first capped, this
--            request's report included; 0 when it is not counted or was
--            deferred.

local function reserve(k, nk, a, na, now)
  -- One bucket and no heartbeat, the common case, runs apart, trimmed for
  -- Redis's time: no tables, each ARGV converted once (or never when not
  -- needed), as few string.format calls as the reply allows (each costs
  -- about as much as a GET). It decides and replies exactly as the loop
  -- below does for one bucket.
  if nk == 1 and na == 7 then
    local key = KEYS[k + 1]
    local tat, ad, prev, hold, n = load(key, now)
    -- x + 0 converts an ARGV as tonumber does, without a call.
    local iv, cost = ARGV[a + 3] + 0, ARGV[a + 5] + 0
    if ad then
      iv = interval(iv, ad, now)
    end
    local at = (tat > now and tat or now) + (cost - ARGV[a + 4]) * iv
    if at < now then
      at = now
    end
    local depart = now + ARGV[a + 2]
    if at > depart then
      depart = at
    end
    local wait = depart - now
    local maxWait = ARGV[a + 1] + 0
    local held = hold and hold - now or 0
    if maxWait < 0 or wait > maxWait then
      return string.format('0 %d 0 %d', wait, held)
    end
    -- depart == at unless floor sets it: the usual case skips a conversion.
    if depart ~= at and depart - at > ARGV[a + 6] + 0 then
      return string.format('1 %d 0 %d 0 0 0', wait, held)
    end
    local booked = (tat > at and tat or at) + cost * iv
    if ad or hold then
      if ad then
        n = n + ARGV[a + 7]
      end
      save(key, booked, ad, now, hold, n)
      return string.format('1 %d 0 %d %d %d %d', wait, held, tat, booked, n)
    end
    -- save without an adaptation: booked > now, so the key expires a
    -- second after its TAT.
    local s = string.format('%d', booked)
    redis.call('SET', key, s, 'PX', string.format('%d', math.ceil((booked - now) / 1000) + 1000))
    -- prev goes as stored when the value held a TAT alone; and a request
    -- that need not wait, the most common reply, needs no format at all.
    prev = prev or string.format('%d', tat)
    if wait == 0 then
      return '1 0 0 0 ' .. prev .. ' ' .. s .. ' 0'
    end
    return string.format('1 %d 0 0 %s %s 0', wait, prev, s)
  end

  local n = nk
  local depart, limiter = now + ARGV[a + 2], 0
  local head = ''
  if na == 5 * nk - 1 then
    n = n - 1
    head = string.format(' %d', beat(KEYS[k + nk], ARGV[a + 5 * n + 3], ARGV[a + 5 * n + 4] + 0, now))
  end
  local tats, ads, holds, ivs, ats, ns = {}, {}, {}, {}, {}, {}
  local held = 0
  for i = 1, n do
    local j = a + 5 * i - 2
    local tat, ad, _, hold, cnt = load(KEYS[k + i], now)
    if hold and hold - now > held then
      held = hold - now
    end
    local iv = ARGV[j] + 0
    if ad then
      iv = interval(iv, ad, now)
    end
    local at = (tat > now and tat or now) + (ARGV[j + 2] - ARGV[j + 1]) * iv
    if at < now then
      at = now
    end
    tats[i], ads[i], holds[i], ivs[i], ats[i], ns[i] = tat, ad, hold, iv, at, cnt
    if at > depart then
      depart, limiter = at, i - 1
    end
  end
  local wait = depart - now
  local maxWait = ARGV[a + 1] + 0
  if maxWait < 0 or wait > maxWait then
    return string.format('0 %d %d%s %d', wait, limiter, head, held)
  end
  local reply = string.format('1 %d %d%s %d', wait, limiter, head, held)
  for i = 1, n do
    local j = a + 5 * i - 2
    local at = ats[i]
    if depart ~= at and depart - at > ARGV[j + 3] + 0 then
      reply = reply .. ' 0 0 0'
    else
      local tat = tats[i]
      local booked = (tat > at and tat or at) + ARGV[j + 2] * ivs[i]
      local cnt = ns[i]
      if ads[i] then
        cnt = cnt + ARGV[j + 4]
      end
      save(KEYS[k + i], booked, ads[i], now, holds[i], cnt)
      reply = reply .. string.format(' %d %d %d', tat, booked, cnt)
    end
  end
  return reply
end
