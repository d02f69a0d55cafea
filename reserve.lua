-- reserve.lua books one slot for a request in every bucket it needs, all or
-- nothing, at one common departure time (GCRA, see leaky.go: this is
-- localStore.reserve in integer microseconds).
--
-- KEYS[i]   bucket i's key; every key shares one {hash tag}.
-- ARGV[1]   now in µs since the Unix epoch, or "" to use Redis's TIME
--           (tests only pass a now).
-- ARGV[2]   maxWait: the longest wait in µs the request accepts.
-- ARGV[3]   floor: the earliest departure in µs after now (0 unless the
--           request's buckets are split over several calls).
-- ARGV[3i+1], ARGV[3i+2], ARGV[3i+3]   bucket i's interval in µs (≥ 1),
--           burst and cost (1 ≤ cost ≤ burst).
--
-- Reply: one string of decimal integers separated by spaces (one bulk
-- string costs the client fewer allocations than an array of integers):
--   "ok wait limiter prev_1 booked_1 ... prev_n booked_n"
--   ok       1 if booked, 0 if the wait exceeds maxWait (nothing booked; the
--            reply then stops after limiter).
--   wait     µs from now until departure: relative, so that the callers'
--            clocks never matter.
--   limiter  0-based index of the bucket that set the wait.
--   prev_i, booked_i  bucket i's TAT (µs) before and after the booking, for
--            refund.lua.
--
-- A key holds its TAT as a decimal integer and expires (PX) a second after
-- the TAT has passed: a bucket whose TAT has passed equals a missing one.
-- Numbers stay below 2^53 (the Go side bounds every span to 2^49 µs), so
-- doubles are exact; they are written with %.0f because tostring would
-- round to 14 digits.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local depart = now + tonumber(ARGV[3])
local limiter = 0
local n = #KEYS
local tats = {}
for i = 1, n do
  local j = 3 * i
  local iv, burst, cost = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  local tat = tonumber(redis.call('GET', KEYS[i])) or 0
  tats[i] = tat
  local at = math.max(tat, now) + (cost - burst) * iv
  if at > depart then
    depart, limiter = at, i - 1
  end
end
local wait = depart - now
if wait > tonumber(ARGV[2]) then
  return string.format('0 %.0f %d', wait, limiter)
end
local reply = {string.format('1 %.0f %d', wait, limiter)}
for i = 1, n do
  local tat = tats[i]
  local booked = math.max(tat, depart) + tonumber(ARGV[3 * i + 3]) * tonumber(ARGV[3 * i + 1])
  redis.call('SET', KEYS[i], string.format('%.0f', booked),
    'PX', string.format('%.0f', math.ceil((booked - now) / 1000) + 1000))
  reply[i + 1] = string.format('%.0f %.0f', tat, booked)
end
return table.concat(reply, ' ')
