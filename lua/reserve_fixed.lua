-- reserve_fixed.lua: take a seller's next slot under a fixed window (policy
-- "fixed"): what a counter per window with INCR + EXPIRE admits. Windows are
-- aligned on multiples of W' since the Unix epoch; the slot is in the first
-- window, from the one holding max(now, blocked_until), with fewer than L
-- slots. Up to 2L calls can fall inside one trailing W' (the end of one
-- window and the start of the next): kept to mirror APIs that count this way.
-- Used by throttle.Throttle.Reserve.
--
-- KEYS[1]  bulkreg:{s:<seller>}:fixed  ZSET, member = reservation id, score = slot in µs (Redis clock)
-- KEYS[2]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs (set by block.lua after a 429)
-- ARGV[1]  L, slots per window
-- ARGV[2]  W' = window + margin, in µs
-- ARGV[3]  max wait in µs: a slot farther ahead than this is not taken
-- ARGV[4]  reservation id (caller-generated, unique)
--
-- Reply: {admitted, at, now, in_window}, as in reserve.lua (in_window counts the trailing
-- [at - W', at], so it shows when a fixed window lets more than L through).
-- Idempotent per id, as reserve.lua.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, win, maxwait, id = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local function us(x) return string.format('%.0f', x) end

local held = redis.call('ZSCORE', KEYS[1], id)
if held then
  local at = tonumber(held)
  return {1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at))}
end

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. us(now - win))
local earliest = now
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > earliest then earliest = blocked end
local start = math.floor(earliest / win) * win
local at
while true do
  local first = math.max(earliest, start)
  if first - now > maxwait then
    return {0, us(first - maxwait), us(now), 0}
  end
  if redis.call('ZCOUNT', KEYS[1], us(start), '(' .. us(start + win)) < limit then
    at = first
    break
  end
  start = start + win
end
redis.call('ZADD', KEYS[1], us(at), id)
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(newest[2]) - now + win) / 1000) + 1000)
return {1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at))}
