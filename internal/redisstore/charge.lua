-- charge.lua books more units of cost in a bucket once the server has said
-- what a request really cost (internal/localstore's gcraCharge and
-- credit.go, in µs). A charge is paid by the bucket's credit first; the
-- rest moves the TAT later by units intervals, from now if the bucket had
-- room. A negative charge is a refund: a bucket with no request booked
-- ahead of now takes it in its TAT, earlier by -units intervals, never
-- before now; a bucket with requests booked ahead takes it as a credit
-- (bucket.lua's saveCredit), bounded by the request's mark; a full bucket
-- takes nothing. The bucket's cap, hold and count are kept.
--
-- KEYS[1]  the bucket's key.
-- ARGV[1]  now in µs, or "" for Redis's TIME (tests pass a now).
-- ARGV[2]  the rule's interval in µs (≥ 1).
-- ARGV[3]  the units to charge (< 0: to refund), never 0.
-- ARGV[4]  the rule's burst.
-- ARGV[5]  the request's mark: the bucket's TAT after its booking, in µs
--          (reserve.lua's booked_i), or 0 when not known.
--
-- Reply: the TAT after the call, µs.

local now = now_us(ARGV[1])
local key = KEYS[1]
local tat, a, _, hold, n = load(key, now)
local units = tonumber(ARGV[3])
local iv = interval(tonumber(ARGV[2]), a, now)
if units > 0 then
  local k, e = loadCredit(key)
  k = creditAt(k, e, now, iv)
  if k > 0 then
    local paid = math.min(k, units)
    saveCredit(key, k - paid, e, now, iv)
    units = units - paid
    if units == 0 then
      return tat
    end
  end
  tat = math.max(tat, now) + units * iv
elseif tat > now and tat - now <= tonumber(ARGV[4]) * iv then
  tat = math.max(tat + units * iv, now)
else
  local mark = tonumber(ARGV[5]) or 0
  if tat > now and mark - now >= iv then
    local k, e = loadCredit(key)
    k = creditAt(k, e, now, iv)
    if mark > e then
      e = mark
    end
    saveCredit(key, creditAt(k - units, e, now, iv), e, now, iv)
  end
  return tat
end
save(key, tat, a, now, hold, n)
return tat
