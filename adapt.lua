-- adapt.lua applies the server's feedback to buckets (adaptLocal in
-- adapt.go, in integer microseconds): it slows a bucket down, at most once
-- per cooldown counted from its last cut (its t0), a hard cut from the
-- bucket's next free slot on; raises a bucket held below its rule by a
-- cut, at most once per the lift's cooldown; and holds it to what remains
-- before the server's reset.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   the cut's factor: multiply the rate by it (0 < factor < 1),
--           or 0 for no cut.
-- ARGV[3]   the cut's cooldown: the least time in µs since the bucket's
--           last cut (its t0).
-- ARGV[4]   the cut's backdate: how far in µs before now the cut places its
--           own t0 (the rate's line is the same from whichever point it is
--           referenced).
-- ARGV[5]   1 if the cut holds from the bucket's next free slot on, else 0.
-- ARGV[6]   spread: units of cost that remain before the reset, or 0.
-- ARGV[7]   spreadIn: µs until the reset, or 0 for no spread.
-- ARGV[8]   the minimum rate as a fraction of the rule's.
-- ARGV[9]   recovery per second as a fraction of the rule's rate.
-- ARGV[10]  the lift: raise the rate by this fraction of the rule's, or 0
--           for no lift (never with a cut or a spread).
-- ARGV[11]  the lift's cooldown in µs since the bucket's last change (t0).
-- ARGV[12]  the lift's backdate in µs, as the cut's.
-- ARGV[13]  the cut's factor for a bucket already held at no more than
--           ARGV[14] of its rule's rate, or 0 for the same as ARGV[2].
-- ARGV[14]  see ARGV[13].
-- ARGV[2i+13], ARGV[2i+14]   bucket i's rule interval in µs (≥ 1) and
--           burst.
--
-- Reply: the number of buckets changed.

-- climb returns the adaptation whose rate is r at time at and climbs by
-- slope per second until it reaches ruleRate, with its t0 placed back µs
-- before at (climb in adapt.go).
local function climb(r, at, back, slope, ruleRate)
  return {r - slope * back / 1000000, at - back, slope, at + math.floor((ruleRate - r) / slope * 1000000)}
end

local now = now_us(ARGV[1])
local slow, cooldown, back, fromFree = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
local spread, spreadIn = tonumber(ARGV[6]), tonumber(ARGV[7])
local minFrac, recover = tonumber(ARGV[8]), tonumber(ARGV[9])
local lift, liftCooldown, liftBack = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local heldSlow, heldBelow = tonumber(ARGV[13]), tonumber(ARGV[14])
local changed = 0
for i = 1, #KEYS do
  local iv, burst = tonumber(ARGV[2 * i + 13]), tonumber(ARGV[2 * i + 14])
  local tat, a, _, hold = load(KEYS[i], now)
  local tat0, a0 = tat, a
  local ruleRate = 1000000 / iv
  if slow > 0 and (not a or now - a[2] >= cooldown) then
    local curIv = interval(iv, a, now)
    local cur = 1000000 / curIv
    local factor = slow
    if a and heldSlow > 0 and cur <= ruleRate * heldBelow then
      factor = heldSlow
    end
    local r0 = math.max(cur * factor, ruleRate * minFrac)
    local slope = ruleRate * recover
    local anchor = now
    if fromFree then
      local free = tat - (burst - 1) * curIv
      anchor = anchor + math.max(0, math.min(free - now, math.floor(r0 / (2 * slope) * 1000000)))
    end
    a = climb(r0, anchor, back, slope, ruleRate)
  end
  -- Only a cut climbs (a spread's slope is 0: it holds until the server's
  -- reset, which the lift's reading knows nothing of).
  if lift > 0 and a and a[3] > 0 and now - a[2] >= liftCooldown then
    local r = 1000000 / interval(iv, a, now) + lift * ruleRate
    if r >= ruleRate then
      a = nil
    else
      a = climb(r, now, liftBack, a[3], ruleRate)
    end
  end
  if spreadIn > 0 and spread > 0 then
    local cur = interval(iv, a, now)
    local spreadIv = math.floor(spreadIn / spread)
    local believed = math.floor(math.max(now + spreadIn - math.max(tat, now), 0) / cur) + burst
    if spread < believed and spreadIv > cur then
      a = {1000000 / spreadIv, now, 0, now + spreadIn}
      tat = math.max(tat, now + spreadIv * (burst - 1))
    end
  end
  if tat ~= tat0 or a ~= a0 then
    save(KEYS[i], tat, a, now, hold)
    changed = changed + 1
  end
end
return changed
