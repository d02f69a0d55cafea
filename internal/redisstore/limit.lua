-- limit.lua caps buckets at the rate the server's answers leave the fleet
-- (internal/feedback decides it; internal/localstore's Store.Limit is the same in Go): from now
-- the bucket's interval is at least that of rate0 units of cost per second,
-- climbing by slope per second, until now + span. A rate0 of 0 caps
-- nothing: the bucket is only counted (its n, see bucket.lua), so that the
-- replicas can tell what the fleet itself sent in the server's window. The
-- count carries on from the cap in force, or starts at 1 (so that a
-- counted bucket never reports 0, which stands for not counted). A pause's
-- hold is kept, and slots already booked keep their times; but a cap that
-- slows the bucket also stretches what it has booked ahead (the TAT past
-- the later of now and the hold) by the new interval over the old, so that
-- the next slot comes where it would have had those slots been booked
-- under the cap: a cut met with a queue booked at the rule's rate (a
-- fleet's first window beside another consumer) would otherwise take
-- effect only after the queue, which fills the server's window meanwhile.
-- A lead is stretched once to a pace: the bucket keeps the slowest
-- interval its lead has been stretched to and how far that part reaches
-- (lead, leadUntil; see bucket.lua), and a later cut stretches that part
-- only below it, and what was booked after it from the interval in force
-- (stretchLead). Stretching the whole lead by each cut over the last cap
-- ratcheted it later with every dip of caps that wander, since raises do
-- not compress: caps of 122-141/s a fleet of 8 x 16 read beside an outside
-- consumer stretched its lead of 0.9 s by 25-30 % a second, gaps in which
-- no slot was booked, and the fleet sent 82-113/s.
-- A cap that retimes (a rejection's: the window is full) says so in the
-- reply (the stretch, store.Stretch), for every replica to re-time the
-- waiters that hold those slots alike; any other cap's stretch moves only
-- what books after it. A cap that speeds the bucket up does not compress:
-- the other replicas' waiters keep their later slots, and new bookings
-- slipped in before them would be a burst
-- (localstore's Store.Limit is the same). A debt (what
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
--           (1: the waiters follow the stretch, 0: they do not) and pay-by
--           (µs from now, 0 for none: a debt's push never takes the TAT
--           past now + pay-by, store.Cap.PayBy).
--
-- Reply: three integers per bucket, the stretch of its booked lead (see
-- store.Stretch): where it starts, in µs from now, and the new and old
-- intervals in µs, whose ratio is the stretch's; 0, 0, 0 when nothing was
-- stretched or the cap does not retime.

-- stretchLead returns the TAT, lead and leadUntil after a cut to will of a
-- bucket whose lead from from to tat was stretched to li up to lu and
-- booked at was after it (localstore's stretchLead is the same).
local function stretchLead(tat, from, was, will, li, lu)
  local mid = from
  if li > 0 and lu > from then
    mid = math.min(lu, tat)
  end
  local s1, s2 = mid - from, tat - mid
  local n1, n2 = s1, s2
  if s1 > 0 and will > li then
    n1 = s1 * will / li
  end
  if s2 > 0 and will > was then
    n2 = s2 * will / was
  end
  if n1 == s1 and n2 == s2 then
    return tat, li, lu
  end
  tat = from + math.ceil(n1 + n2)
  return tat, will, tat
end

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
    local li, lu = 0, 0
    if old then
      a[5] = old[5] or 0
      li, lu = old[6] or 0, old[7] or 0
    end
    local iv = tonumber(ARGV[j + 5])
    local from = now
    if hold and hold > from then
      from = hold
    end
    if tat <= from then
      li, lu = 0, 0
    else
      local was, will = interval(iv, old, now), interval(iv, a, now)
      if ARGV[j + 7] ~= "1" then
        tat, li, lu = stretchLead(tat, from, was, will, li, lu)
      elseif will > was then
        -- The waiters move by will/was from from (store.Stretch), and
        -- the lead with them.
        tat = from + math.ceil((tat - from) * will / was)
        li, lu = will, tat
        reply[3 * i - 2], reply[3 * i - 1], reply[3 * i] = from - now, will, was
      end
    end
    a[6], a[7] = li, lu
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
