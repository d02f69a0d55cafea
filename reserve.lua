-- reserve.lua books one slot for a request in every bucket it needs, all or
-- nothing (GCRA, see leaky.go: this is localStore.reserve in integer
-- microseconds). Each bucket is booked at the request's earliest time in
-- it; the request departs at the latest of those times.
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   maxWait: the longest wait in µs the request accepts.
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]   bucket i's rule interval in µs (≥ 1),
--           burst and cost (1 ≤ cost ≤ burst).
--
-- Heartbeat (at most once per interval per replica, see heartbeat.lua):
-- when #ARGV == 3·#KEYS + 1, the last key is the namespace's replica set
-- (it shares the buckets' {hash tag}) and the last two ARGV are this
-- replica's id and TTL in µs. The replica is registered before the
-- buckets are looked at, whether or not the request is booked, and the
-- count of live replicas follows limiter in the reply.
--
-- Reply: one string of decimal integers separated by spaces (one bulk
-- string costs the client fewer allocations than an array of integers):
--   "ok wait limiter [live] prev_1 booked_1 ... prev_n booked_n"
--   ok       1 if booked, 0 if the wait exceeds maxWait (nothing booked; the
--            reply then stops after limiter).
--   wait     µs from now until departure: relative, so that the callers'
--            clocks never matter.
--   limiter  0-based index of the bucket that set the wait.
--   live     only with a heartbeat: the live replicas, this one included.
--   prev_i, booked_i  bucket i's TAT (µs) before and after the booking, for
--            refund.lua.

local now = now_us(ARGV[1])
local depart, limiter = now, 0
local n = #KEYS
local head = ''
if #ARGV == 3 * n + 1 then
  n = n - 1
  head = string.format(' %d', beat(KEYS[n + 1], ARGV[3 * n + 3], tonumber(ARGV[3 * n + 4]), now))
end
local tats, ads, ivs, ats = {}, {}, {}, {}
for i = 1, n do
  local j = 3 * i
  local burst, cost = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  local tat, a = load(KEYS[i], now)
  local iv = interval(tonumber(ARGV[j]), a, now)
  local at = math.max(math.max(tat, now) + (cost - burst) * iv, now)
  tats[i], ads[i], ivs[i], ats[i] = tat, a, iv, at
  if at > depart then
    depart, limiter = at, i - 1
  end
end
local wait = depart - now
if wait > tonumber(ARGV[2]) then
  return string.format('0 %.0f %d', wait, limiter) .. head
end
local reply = {string.format('1 %.0f %d', wait, limiter) .. head}
for i = 1, n do
  local booked = math.max(tats[i], ats[i]) + tonumber(ARGV[3 * i + 2]) * ivs[i]
  save(KEYS[i], booked, ads[i], now)
  reply[i + 1] = string.format('%.0f %.0f', tats[i], booked)
end
return table.concat(reply, ' ')
