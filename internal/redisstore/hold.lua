-- hold.lua reports how long a pause the server asked for (pause.lua) still
-- holds buckets: a waiter about to depart while the fleet probes a refusal
-- asks it first, so that a pause another replica was told of a moment ago
-- holds it back too (see waitQueue.depart).
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[i+1] bucket i's algorithm code (a window bucket keeps its hold in
--           its envelope, see window.lua).
--
-- Reply: µs from now until the latest hold of the buckets ends, or 0.

local now = now_us(ARGV[1])
local W = windowLib()
local held = 0
for i = 1, #KEYS do
  local hold
  if (tonumber(ARGV[i + 1]) or 0) < 2 then
    local _
    _, _, _, hold = load(KEYS[i], now)
  else
    hold = W.loadEnv(W.envKey(KEYS[i]), now)[3]
  end
  if hold and hold - now > held then
    held = hold - now
  end
end
return held
