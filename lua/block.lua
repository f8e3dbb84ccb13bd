-- block.lua: the API answered 429 with Retry-After; no new slot of the seller
-- starts before now + Retry-After, for every consumer at once.
-- Used by throttle.Throttle.Block, for every policy.
--
-- Slots already handed out keep their times: their callers are asleep and
-- cannot be told. If the API refuses them too, each 429 calls this again
-- (harmless: the block only ever moves forward).
--
-- KEYS[1]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs (Redis clock)
-- ARGV[1]  Retry-After in µs
--
-- Reply: blocked until, µs as a string (the later of the existing block and now + Retry-After).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local blocked = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur > blocked then blocked = cur end
-- the key expires a second after the block ends
redis.call('SET', KEYS[1], string.format('%.0f', blocked), 'PX', math.ceil((blocked - now) / 1000) + 1000)
return string.format('%.0f', blocked)
