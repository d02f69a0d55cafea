-- quota.lua reads the state of a request's buckets for a server's
-- rate-limit headers (the middleware package), changing nothing: the
-- Redis store's Quotas runs it after the request's reserve call and works
-- the room out in Go (quota.go), with internal/algorithm's maths.
--
-- KEYS[i]    bucket i's key (all of them share one {hash tag}).
-- ARGV[1]    now in µs since the Unix epoch, or "" for Redis's TIME.
-- ARGV[1+i]  bucket i's window in µs for a sliding log, else 0.
--
-- Reply: an array: now (µs), then one string per bucket: the bucket's
-- value as stored ("" for a missing key: "tat ..." for a leaky or token
-- bucket, "last first c0 c1 ..." for a fixed window or sliding counter,
-- see bucket.lua and window.lua), or for a sliding log the scores of its
-- entries after now - window, in order, separated by spaces.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local out = {now}
for i = 1, #KEYS do
  local w = tonumber(ARGV[1 + i])
  if w > 0 then
    local e = redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. string.format('%d', now - w), '+inf', 'WITHSCORES')
    local scores = {}
    for j = 2, #e, 2 do
      scores[#scores + 1] = e[j]
    end
    out[#out + 1] = table.concat(scores, ' ')
  else
    out[#out + 1] = redis.call('GET', KEYS[i]) or ''
  end
end
return out
