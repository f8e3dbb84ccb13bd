-- release.lua: give back a slot its caller will not use (shutdown, cancelled,
-- a call the API did not count), so the next caller can take it.
-- Used by throttle.Throttle.Release, for every policy.
--
-- KEYS[1]  the policy's log: bulkreg:{s:<seller>}:log (sliding), :fixed or :tb (token bucket); ZSET as in reserve*.lua
-- KEYS[2]  token bucket only: bulkreg:{s:<seller>}:tb:tat, STRING, theoretical arrival time in µs
-- ARGV[1]  reservation id
-- ARGV[2]  token bucket only: the emission interval in µs (reserve_token_bucket.lua), credited back to the bucket
--
-- Reply: 1 when the id held a slot and it was removed, 0 when it held none.
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 and KEYS[2] then
  local tat = tonumber(redis.call('GET', KEYS[2]) or '0')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  tat = tat - tonumber(ARGV[2])
  if tat > now then
    redis.call('SET', KEYS[2], string.format('%.3f', tat), 'KEEPTTL')
  end
end
return removed
