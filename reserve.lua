-- reserve.lua books one slot for a request in every bucket it needs, all or
-- nothing (GCRA, see leaky.go: this is localStore.reserve in integer
-- microseconds). The request departs at the latest of its earliest times
-- in its buckets. Each bucket is booked at the request's earliest time in
-- it, unless that comes before the departure by more than the bucket's
-- lateness tolerance: such a bucket is deferred (not booked; the caller
-- books it at the departure, see reservation.deferred).
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   maxWait: the longest wait in µs the request accepts; a
--           negative one books nothing and only reports the wait.
-- ARGV[3]   floor: the earliest departure in µs after now (0 unless the
--           request's buckets are split over several calls).
-- ARGV[4i], ARGV[4i+1], ARGV[4i+2], ARGV[4i+3]   bucket i's rule interval
--           in µs (≥ 1), burst, cost (1 ≤ cost ≤ burst) and lateness
--           tolerance in µs.
--
-- Heartbeat (at most once per interval per replica, see heartbeat.lua):
-- when #ARGV == 4·#KEYS + 1, the last key is the namespace's replica set
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
--            refund.lua; both 0 for a deferred bucket.

local now = now_us(ARGV[1])
local depart, limiter = now + tonumber(ARGV[3]), 0
local n = #KEYS
local head = ''
if #ARGV == 4 * n + 1 then
  n = n - 1
  head = string.format(' %d', beat(KEYS[n + 1], ARGV[4 * n + 4], tonumber(ARGV[4 * n + 5]), now))
end
local tats, ads, ivs, ats = {}, {}, {}, {}
for i = 1, n do
  local j = 4 * i
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
local maxWait = tonumber(ARGV[2])
if maxWait < 0 or wait > maxWait then
  return string.format('0 %.0f %d', wait, limiter) .. head
end
local reply = {string.format('1 %.0f %d', wait, limiter) .. head}
for i = 1, n do
  if depart - ats[i] > tonumber(ARGV[4 * i + 3]) then
    reply[i + 1] = '0 0'
  else
    local booked = math.max(tats[i], ats[i]) + tonumber(ARGV[4 * i + 2]) * ivs[i]
    save(KEYS[i], booked, ads[i], now)
    reply[i + 1] = string.format('%.0f %.0f', tats[i], booked)
  end
end
return table.concat(reply, ' ')
