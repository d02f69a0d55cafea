-- limit.lua caps buckets at the rate the server's answers leave the fleet
-- (internal/feedback decides it; internal/localstore's Store.Limit is the same in Go): from now
-- the bucket's interval is at least that of rate0 units of cost per second,
-- climbing by slope per second, until now + span. A rate0 of 0 caps
-- nothing: the bucket is only counted (its n, see bucket.lua), so that the
-- replicas can tell what the fleet itself sent in the server's window. The
-- count carries on from the cap in force, or starts at 1 (so that a
-- counted bucket never reports 0, which stands for not counted). The TAT and a
-- pause's hold are kept: slots already booked keep their times. A window
-- bucket keeps its cap and count in its envelope (window.lua), where the
-- cap is a GCRA constraint of its own.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[5i-3] … ARGV[5i+1]   bucket i's rate0 (units per second, ≥ 0),
--           slope (units per second per second, ≥ 0), span (µs, ≥ 1),
--           algorithm code and window in µs (0 for a leaky or token
--           bucket).
--
-- Reply: the number of buckets written.

local now = now_us(ARGV[1])
local W = windowLib()
for i = 1, #KEYS do
  local j = 5 * i - 3
  local a = {tonumber(ARGV[j]), now, tonumber(ARGV[j + 1]), now + tonumber(ARGV[j + 2])}
  if (tonumber(ARGV[j + 3]) or 0) < 2 then
    local tat, _, _, hold, n = load(KEYS[i], now)
    if n < 1 then
      n = 1
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
return #KEYS
