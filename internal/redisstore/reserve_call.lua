-- reserve_call.lua books one request (reserve.lua, after bucket.lua and
-- heartbeat.lua). KEYS are the request's keys; ARGV[1] is now in µs since
-- the Unix epoch, or "" to use Redis's TIME (tests only pass a now), and
-- the rest are the request's arguments as reserve.lua lists them. Reply:
-- reserve's string.

return reserve(0, #KEYS, 1, #ARGV - 1, now_us(ARGV[1]))
