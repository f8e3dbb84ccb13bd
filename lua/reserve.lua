-- reserve.lua: take a seller's next slot in a sliding log with reservations
-- (policy "sliding", the default). Used by throttle.Throttle.Reserve.
--
-- With the log's scores sorted s1 <= ... <= sn (future reservations included),
-- the slot is t = max(now, blocked_until, s(n-L+1) + W' + 1µs). The extra
-- microsecond keeps two slots L apart strictly more than W' apart, so no
-- window of length W' holds more than L slots whether the API counts its
-- window closed or half-open.
--
-- KEYS[1]  bulkreg:{s:<seller>}:log    ZSET, member = reservation id, score = slot in µs (Redis clock)
-- KEYS[2]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs (set by block.lua after a 429)
-- ARGV[1]  L, slots per window
-- ARGV[2]  W' = window + margin, in µs
-- ARGV[3]  max wait in µs: a slot farther ahead than this is not taken
-- ARGV[4]  reservation id (caller-generated, unique)
--
-- Reply: {admitted, at, now, in_window}
--   admitted   1: the slot at `at` is held under the id; 0: nothing was written
--   at         µs, as a string: the slot when admitted, else when to ask again
--   now        µs, as a string: the Redis clock when the script ran
--   in_window  slots in [at - W', at], this one included (0 when not admitted)
--
-- Idempotent per id: when the id already holds a slot (a retry of a call
-- whose answer was lost), the reply is that slot and nothing changes.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, win, maxwait, id = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local function us(x) return string.format('%.0f', x) end

local held = redis.call('ZSCORE', KEYS[1], id)
if held then
  local at = tonumber(held)
  return {1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at))}
end

-- slots older than now - W' can no longer share a window with a new slot
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. us(now - win))
local at = now
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > at then at = blocked end
local n = redis.call('ZCARD', KEYS[1])
if n >= limit then
  local s = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
  local bound = tonumber(s[2]) + win + 1
  if bound > at then at = bound end
end
if at - now > maxwait then
  return {0, us(at - maxwait), us(now), 0}
end
redis.call('ZADD', KEYS[1], us(at), id)
-- the log lives until its newest slot has left the window: an idle seller costs nothing
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(newest[2]) - now + win) / 1000) + 1000)
return {1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at))}
