#!lua flags=no-writes
-- forecast.lua: when would a seller's next rows get their slots, writing
-- nothing. A seller's finish estimate: the rows still waiting take the slots
-- held ahead first, in order, and then the slots reserve.lua would give them
-- one after another, t = max(now, blocked_until, s(n-L+1) + W' + 1µs) over the
-- log with each new slot added. Used by throttle.Throttle.Forecast.
--
-- KEYS[1]  bulkreg:{s:<seller>}:log    ZSET, member = reservation id, score = slot in µs (as in reserve.lua)
-- KEYS[2]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs
-- KEYS[3]  the seller's hash-slot marker (slot_guard.lua): its hold, after a loss of Redis's data, delays every slot;
--          a marker not yet written (a Redis never initialised) is not foreseen
-- ARGV[1]  L, slots per window
-- ARGV[2]  W' = window + margin, in µs
-- ARGV[3]  n, the rows to place (at most 100000)
--
-- Reply: {now, held, last}; times are µs as strings on the Redis clock.
--   held  slots in the log at or after now: rows that hold a slot and wait for it
--   last  the slot of the n-th row: the n-th held slot when n <= held, else the slot computed
--         for it; now when n is 0
--
-- A slot that has begun is not held: its row is being called or is done, and
-- the log cannot tell which. A row being called is counted in n by the caller
-- and so gets a slot computed for it: for the length of a call the last row
-- may be placed up to one window late, never early.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, win, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local function us(x) return string.format('%.0f', x) end
if n > 100000 then
  return redis.error_reply('forecast.lua: n must be at most 100000, got ' .. n)
end

-- the slots that can still share a window with a new one, ascending
local raw = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. us(now - win), '+inf', 'WITHSCORES')
local s = {}
for i = 2, #raw, 2 do s[#s + 1] = tonumber(raw[i]) end
local held = {}
for _, v in ipairs(s) do
  if v >= now then held[#held + 1] = v end
end
if n == 0 then
  return {us(now), #held, us(now)}
end
if n <= #held then
  return {us(now), #held, us(held[n])}
end
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
-- a hold after a loss of Redis's data (slot_guard.lua) delays every seller of the hash slot
if KEYS[3] then
  local hold = tonumber(redis.call('HGET', KEYS[3], 'hold') or '0')
  if hold > blocked then blocked = hold end
end
local last = now
for _ = 1, n - #held do
  local at = math.max(now, blocked)
  if #s >= limit then
    at = math.max(at, s[#s - limit + 1] + win + 1)
  end
  -- keep s sorted: a new slot is before held ones only while fewer than L are in the window
  local i = #s + 1
  while i > 1 and s[i - 1] > at do
    s[i] = s[i - 1]
    i = i - 1
  end
  s[i] = at
  if at > last then last = at end
end
return {us(now), #held, us(last)}
