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
-- Then each bucket's arguments, from j = a+3 on, 5 for a leaky or token
-- bucket (their bookings are alike; only pause.lua tells them apart), 8 for
-- a window bucket, told apart by the sign of the first:
--   leaky or token bucket: ARGV[j] … ARGV[j+4]: its rule interval in µs
--            (≥ 1), burst, cost (1 ≤ cost ≤ burst), lateness tolerance L in
--            µs (≥ 0), or −1 − L when the bucket can hold a credit (its
--            rule corrects costs: charge.lua), and the units of cost this replica sent in the
--            bucket since it last reported them (≥ 0), added to the
--            bucket's count while it is counted (see bucket.lua) and the
--            request booked.
--   window bucket: ARGV[j] … ARGV[j+7]: minus its algorithm's code (see
--            window.lua), its quota per window, cost (1 ≤ cost ≤ quota),
--            the rule's interval Period/Rate in µs (what a cap compares
--            with), the units sent (as above), the window in µs, the
--            fixed window's anchor in µs (0 for the others) and its or
--            the sliding counter's edge in µs (0 for the sliding log; see
--            algorithm.Window). A window bucket is booked at the
--            departure, never deferred.
-- A request of leaky and token buckets alone thus sends what it sent
-- before the window algorithms, and the one-bucket fast path is the same.
--
-- A request of leaky and token buckets departs at the latest of their
-- earliest times. A window bucket's earliest time depends on the time
-- asked (its window may be full then, and the next have room), so with
-- one the departure is found by rounds: each bucket moves it to its
-- earliest time at or after it, until none does. Each round moves it to a
-- later window or past an entry, so the rounds end, at the latest past
-- every booking made.
--
-- Heartbeat (at most once per interval per replica, see heartbeat.lua):
-- when the arguments of nk - 1 buckets leave two over, the request's last
-- key is the namespace's replica set
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
--            refund.lua; both 0 for a deferred bucket. For a window
--            bucket: the start of the window booked (the departure, for a
--            sliding log) and the cost.
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
    if wait > 0 and maxWait >= 0 and not hold and depart == at then
      -- A request that would queue leaves at once on the bucket's credit
      -- when it covers its cost (bucket.lua's takeCredit).
      local mark = takeCredit(key, ARGV[a + 6] + 0, cost, iv, now)
      if mark then
        if ad then
          n = n + ARGV[a + 7]
          save(key, tat, ad, now, hold, n)
          return string.format('1 0 0 0 %d %d %d', mark, mark, n)
        end
        return string.format('1 0 0 0 %d %d 0', mark, mark)
      end
    end
    if maxWait < 0 or wait > maxWait then
      return string.format('0 %d 0 %d', wait, held)
    end
    -- depart == at unless floor sets it: the usual case skips a conversion.
    if depart ~= at and depart - at > lateness(ARGV[a + 6] + 0) then
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
  -- js[i]: where bucket i's arguments start.
  local js = {}
  local j = a + 3
  for i = 1, nk do
    js[i] = j
    if ARGV[j] + 0 < 0 then
      j = j + 8
    else
      j = j + 5
    end
    if i == nk - 1 and j == a + na - 1 then
      n = n - 1
      head = string.format(' %d', beat(KEYS[k + nk], ARGV[j], ARGV[j + 1] + 0, now))
      break
    end
  end
  -- Per bucket: its state (tats, ads, holds, ns: TAT, cap, hold and count
  -- as bucket.lua loads them; for a window bucket tats holds its counts
  -- and envs its envelope), its interval in force and its earliest time.
  local tats, ads, holds, ivs, ats, ns, envs, civs = {}, {}, {}, {}, {}, {}, {}, {}
  local windows = false
  local W -- window.lua's functions, made for the first window bucket
  local held = 0
  for i = 1, n do
    local j = js[i]
    local key = KEYS[k + i]
    if ARGV[j] + 0 > 0 then
      local tat, ad, _, hold, cnt = load(key, now)
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
    else
      windows = true
      W = W or windowLib()
      local e = W.loadEnv(W.envKey(key), now)
      envs[i] = e
      if e[3] - now > held then
        held = e[3] - now
      end
      civs[i] = W.capInterval(e[2], ARGV[j + 3] + 0, now)
      if ARGV[j] + 0 ~= -3 then
        tats[i] = W.loadCounts(key)
      end
    end
  end
  -- earliest returns window bucket i's earliest time at or after t.
  local function earliest(i, t)
    local j = js[i]
    local e = envs[i]
    if civs[i] then
      local at = (e[1] > now and e[1] or now) + (ARGV[j + 2] - 1) * civs[i]
      if at > t then
        t = at
      end
    end
    local alg, p, q, cost = -ARGV[j], ARGV[j + 5] + 0, ARGV[j + 1] + 0, ARGV[j + 2] + 0
    if alg == 2 then
      return W.fixedAt(tats[i], p, q, ARGV[j + 6] + 0, ARGV[j + 7] + 0, t, e[3], cost)
    elseif alg == 4 then
      return W.counterAt(tats[i], p, q, ARGV[j + 7] + 0, t, e[3], cost)
    end
    return W.logAt(KEYS[k + i], p, q, t, e[3], cost, now)
  end
  if windows then
    local moved = true
    while moved do
      moved = false
      for i = 1, n do
        if envs[i] then
          local at = earliest(i, depart)
          if at > depart then
            depart, limiter, moved = at, i - 1, true
          end
        elseif ats[i] > depart then
          depart, limiter, moved = ats[i], i - 1, true
        end
      end
    end
  end
  local wait = depart - now
  local maxWait = ARGV[a + 1] + 0
  if n == 1 and not windows and wait > 0 and maxWait >= 0 and not holds[1] and depart == ats[1] then
    -- As the one-bucket path above: the bucket's credit.
    local key = KEYS[k + 1]
    local mark = takeCredit(key, ARGV[js[1] + 3] + 0, ARGV[js[1] + 2] + 0, ivs[1], now)
    if mark then
      local cnt = 0
      if ads[1] then
        cnt = ns[1] + ARGV[js[1] + 4]
        save(key, tats[1], ads[1], now, holds[1], cnt)
      end
      return string.format('1 0 0%s 0 %d %d %d', head, mark, mark, cnt)
    end
  end
  if maxWait < 0 or wait > maxWait then
    return string.format('0 %d %d%s %d', wait, limiter, head, held)
  end
  local reply = string.format('1 %d %d%s %d', wait, limiter, head, held)
  for i = 1, n do
    local j = js[i]
    local e = envs[i]
    if e then
      local alg, p, cost = -ARGV[j], ARGV[j + 5] + 0, ARGV[j + 2] + 0
      local key = KEYS[k + i]
      local prev = depart
      if alg == 3 then
        W.logBook(key, p, ARGV[j + 1] + 0, depart, cost, now)
      else
        local c = tats[i]
        local anchor = 0
        local keep = p
        if alg == 2 then
          anchor, keep = ARGV[j + 6] + 0, 0
          W.countTrim(c, p, W.wstart(now, p, anchor))
        else
          W.countTrim(c, p, W.wstart(now, p, 0) - p)
        end
        prev = W.wstart(depart, p, anchor)
        W.countAdd(c, p, prev, cost)
        if depart > c[1] then
          c[1] = depart
        end
        W.saveCounts(key, c, p, now, keep)
      end
      if civs[i] then
        e[1] = (e[1] > depart and e[1] or depart) + cost * civs[i]
      end
      if e[2] then
        e[4] = e[4] + ARGV[j + 4]
      end
      if e[2] or civs[i] then
        W.saveEnv(W.envKey(key), e, now, p)
      end
      reply = reply .. string.format(' %d %d %d', prev, cost, e[2] and e[4] or 0)
    elseif depart ~= ats[i] and depart - ats[i] > lateness(ARGV[j + 3] + 0) then
      reply = reply .. ' 0 0 0'
    else
      local at = ats[i]
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
