#!lua flags=no-writes
-- peek.lua: read a seller's throttle state for metrics and operators, writing
-- nothing. next_free is the slot a reservation would get now (max wait aside),
-- computed as reserve.lua, reserve_fixed.lua and reserve_token_bucket.lua do.
-- Used by throttle.Throttle.Peek.
--
-- KEYS[1]  the policy's log: bulkreg:{s:<seller>}:log (sliding), :fixed or :tb; ZSET as in reserve*.lua
-- KEYS[2]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs
-- KEYS[3]  bulkreg:{s:<seller>}:tb:tat STRING, token bucket only (pass it for every kind; unused otherwise)
-- KEYS[4]  bulkreg:{<tag>}:marker      HASH, the marker of the seller's hash slot; field hold (slot_guard.lua)
-- ARGV[1]  kind: "sliding", "fixed" or "token-bucket"
-- ARGV[2]  L, slots per window
-- ARGV[3]  W' = window + margin, in µs
-- ARGV[4]  sliding: reach, in µs, from a slot to its call's latest count (reserve.lua);
--          fixed: W, the API's window in µs; token bucket: the emission interval in µs (unused here)
-- ARGV[5]  token bucket: the tolerance in µs (as in reserve_token_bucket.lua)
--
-- Reply: {now, in_window, next_free, blocked_until}; times are µs as strings on the Redis clock,
-- blocked_until is "0" when the seller is not blocked. in_window counts the calls the API may count
-- in the window ending now: a sliding log's latest counts in [now - W', now + reach] (a call sent by
-- now has its latest count by now + reach), the other logs' slots in [now - W', now].
-- A hold after a loss counts in next_free; a loss no reservation has found yet does not (nothing is written here).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local kind, limit, win = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function us(x) return string.format('%.0f', x) end

local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
local hold = tonumber(redis.call('HGET', KEYS[4], 'hold') or '0') or 0
local next_free = math.max(now, blocked, hold)
if kind == 'sliding' then
  -- as reserve.lua, with the latest counts older than now - W' skipped instead of trimmed
  local old = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. us(now - win))
  local n = redis.call('ZCARD', KEYS[1]) - old
  if n >= limit then
    local s = redis.call('ZRANGE', KEYS[1], old + n - limit, old + n - limit, 'WITHSCORES')
    next_free = math.max(next_free, tonumber(s[2]) + win + 1)
  end
elseif kind == 'fixed' then
  local W = tonumber(ARGV[4])
  local start = math.floor(next_free / W) * W
  if next_free >= start + W - (win - W) then start = start + W end
  while redis.call('ZCOUNT', KEYS[1], us(start), '(' .. us(start + W)) >= limit do
    start = start + W
  end
  next_free = math.max(next_free, start)
elseif kind == 'token-bucket' then
  local tat = tonumber(string.match(redis.call('GET', KEYS[3]) or '0', '^%S+')) or 0
  next_free = math.max(next_free, math.ceil(tat - tonumber(ARGV[5])))
else
  return redis.error_reply('peek.lua: unknown kind ' .. tostring(kind))
end
local upto = now
if kind == 'sliding' then upto = now + tonumber(ARGV[4] or '0') end
local in_window = redis.call('ZCOUNT', KEYS[1], us(now - win), us(upto))
return {us(now), in_window, us(next_free), us(blocked)}
