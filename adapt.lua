-- adapt.lua applies the server's feedback to buckets (adaptLocal in
-- adapt.go, in integer microseconds): it slows a bucket down, at most once
-- per cooldown, and holds it to what remains before the server's reset.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   slow: the factor to multiply the rate by (0 < slow < 1), or 0.
-- ARGV[3]   spread: units of cost that remain before the reset, or 0.
-- ARGV[4]   spreadIn: µs until the reset, or 0 for no spread.
-- ARGV[5]   cooldown µs, ARGV[6] minimum rate as a fraction of the rule's,
-- ARGV[7]   recovery per second as a fraction of the rule's rate.
-- ARGV[2i+6], ARGV[2i+7]   bucket i's rule interval in µs (≥ 1) and burst.
--
-- Reply: the number of buckets changed.

local now = now_us(ARGV[1])
local slow, spread, spreadIn = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cooldown, minFrac, recover = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local changed = 0
for i = 1, #KEYS do
  local iv, burst = tonumber(ARGV[2 * i + 6]), tonumber(ARGV[2 * i + 7])
  local tat, a = load(KEYS[i], now)
  local tat0, a0 = tat, a
  local ruleRate = 1000000 / iv
  if slow > 0 and (not a or now - a[2] >= cooldown) then
    local r0 = math.max(1000000 / interval(iv, a, now) * slow, ruleRate * minFrac)
    local slope = ruleRate * recover
    a = {r0, now, slope, now + math.floor((ruleRate - r0) / slope * 1000000)}
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
    save(KEYS[i], tat, a, now)
    changed = changed + 1
  end
end
return changed
