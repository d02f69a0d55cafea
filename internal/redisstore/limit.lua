-- limit.lua caps buckets at the rate the server's answers leave the fleet
-- (internal/feedback decides it; internal/localstore's Store.Limit is the same in Go): from now
-- the bucket's interval is at least that of rate0 units of cost per second,
-- climbing by slope per second, until now + span. A rate0 of 0 caps
-- nothing: the bucket is only counted (its n, see bucket.lua), so that the
-- replicas can tell what the fleet itself sent in the server's window. The
-- count carries on from the cap in force, or starts at 1 (so that a
-- counted bucket never reports 0, which stands for not counted). A pause's
-- hold is kept, and slots already booked keep their times: a cap paces what
-- books after it. Only a cap that retimes (a rejection's: the window is full
-- for sure) and slows the bucket also stretches what the bucket has booked
-- ahead (the TAT past the later of now and the hold) by the new interval
-- over the old, and says so in the reply (the stretch, store.Stretch), for
-- every replica to re-time the waiters that hold those slots alike. A
-- success's cut does not: its reading is only as sure as its slack, the
-- caps of a fleet beside another consumer wander a few per cent around
-- the room, and a stretch at every dip that no raise undid left gaps in
-- which no slot was booked (an 8 x 16 fleet beside an outside consumer
-- sent 98-128/s under caps of 124-158/s around a room of 135/s, 0.79-0.82
-- of what remained; without it 0.93-0.95, internal/feedbacktest's outside
-- cells, 2026-12-05). A cap that speeds the bucket up does not compress
-- either: the other replicas' waiters keep their later slots, and new
-- bookings slipped in before them would be a burst (localstore's
-- Store.Limit is the same). A debt (what
-- the fleet sent beyond the cap's pace since the count began, units of
-- cost; see store.Cap.Debt) is a high-water mark of the count: the part of
-- it that no cap of this count has paid yet pushes the TAT (from the later
-- of itself, now and the hold) that many capped intervals later, so that
-- the replicas reading the same count pay it once. A window bucket keeps
-- its cap and count in its envelope (window.lua), where the cap is a GCRA
-- constraint of its own, and is neither stretched nor pushed.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[9i-7] … ARGV[9i+1]   bucket i's rate0 (units per second, ≥ 0),
--           slope (units per second per second, ≥ 0), span (µs, ≥ 1),
--           algorithm code, window in µs (0 for a leaky or token bucket),
--           rule interval in µs (≥ 1), debt (units of cost, ≥ 0), retime
--           (1: a cut stretches the lead and the waiters follow it, 0: the
--           cap paces only what books after it) and pay-by
--           (µs from now, 0 for none: a debt's push never takes the TAT
--           past now + pay-by, store.Cap.PayBy).
--
-- Reply: three integers per bucket, the stretch of its booked lead (see
-- store.Stretch): where it starts, in µs from now, and the new and old
-- intervals in µs, whose ratio is the stretch's; 0, 0, 0 when nothing was
-- stretched or the cap does not retime.

local now = now_us(ARGV[1])
local W = windowLib()
local reply = {}
for i = 1, #KEYS do
  reply[3 * i - 2], reply[3 * i - 1], reply[3 * i] = 0, 0, 0
  local j = 9 * i - 7
  local a = {tonumber(ARGV[j]), now, tonumber(ARGV[j + 1]), now + tonumber(ARGV[j + 2]), 0}
  if (tonumber(ARGV[j + 3]) or 0) < 2 then
    local tat, old, _, hold, n = load(KEYS[i], now)
    if n < 1 then
      n = 1
    end
    if old then
      a[5] = old[5] or 0
    end
    local iv = tonumber(ARGV[j + 5])
    local from = now
    if hold and hold > from then
      from = hold
    end
    if tat > from and ARGV[j + 7] == "1" then
      local was, will = interval(iv, old, now), interval(iv, a, now)
      if will > was then
        -- The waiters move by will/was from from (store.Stretch), and
        -- the lead with them.
        tat = from + math.ceil((tat - from) * will / was)
        reply[3 * i - 2], reply[3 * i - 1], reply[3 * i] = from - now, will, was
      end
    end
    local debt = tonumber(ARGV[j + 6]) or 0
    if debt > a[5] then
      local base = math.max(tat, from)
      local push = math.ceil((debt - a[5]) * interval(iv, a, now))
      local by = tonumber(ARGV[j + 8]) or 0
      if by > 0 then
        push = math.max(math.min(push, now + by - base), 0)
      end
      tat = base + push
      a[5] = debt
    end
    save(KEYS[i], tat, a, now, hold, n)
  else
    local ek = W.envKey(KEYS[i])
    local e = W.loadEnv(ek, now)
    if e[4] < 1 then
      e[4] = 1
    end
    e[2] = a
    W.saveEnv(ek, e, now, tonumber(ARGV[j + 4]))
  end
end
return reply
