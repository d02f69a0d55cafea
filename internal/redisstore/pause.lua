-- pause.lua holds buckets shut until now + d, never shortening a longer
-- hold already in place. A leaky bucket's next request of cost 1 conforms
-- at that time and the bucket refills from empty afterwards (gcraPause in
-- internal/localstore, in integer microseconds, at the interval in force);
-- a token bucket has no tokens left at that time (algorithm.TokenPause).
-- Both record the pause's end in the bucket (its hold, see bucket.lua). A
-- window bucket records it in its envelope (window.lua), and its
-- algorithm counts the windows before it as full (see internal/algorithm).
-- reserve.lua reports the hold to every replica that books the bucket until
-- then: their waiters whose slots were booked before the pause, inside it,
-- book again after it (waitQueue.hold) instead of leaving into the server's
-- rejection.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   d: the pause in µs (≥ 0).
-- ARGV[4i-1] … ARGV[4i+2]   bucket i's rule interval in µs (≥ 1), burst,
--           algorithm code and window in µs (0 for a leaky or token
--           bucket).
--
-- Reply: the number of buckets whose TAT or hold moved.

local now = now_us(ARGV[1])
local W = windowLib()
local untilT = now + tonumber(ARGV[2])
local moved = 0
for i = 1, #KEYS do
  local j = 4 * i - 1
  local alg = ARGV[j + 2] + 0
  if alg < 2 then
    local tat, a, _, hold, n = load(KEYS[i], now)
    local iv = interval(ARGV[j] + 0, a, now)
    local held = untilT + (ARGV[j + 1] - 1) * iv
    if alg == 1 then
      held = untilT + ARGV[j + 1] * iv
    end
    if held > tat then
      tat = held
      moved = moved + 1
    end
    if untilT > now and (not hold or untilT > hold) then
      hold = untilT
    end
    save(KEYS[i], tat, a, now, hold, n)
  elseif untilT > now then
    local ek = W.envKey(KEYS[i])
    local e = W.loadEnv(ek, now)
    if untilT > e[3] then
      e[3] = untilT
      moved = moved + 1
      W.saveEnv(ek, e, now, ARGV[j + 3] + 0)
    end
  end
end
return moved
