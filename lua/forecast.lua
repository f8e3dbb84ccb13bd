#!lua flags=no-writes
-- forecast.lua: when would a seller's next rows get their slots, writing
-- nothing. A seller's finish estimate: the rows still waiting take the slots
-- held ahead first, in order, and then the slots the policy's reserve script
-- would give them one after another, each new slot counted before the next:
--   sliding       t = max(now, blocked_until, e(n-L+1) + W' + 1µs) over the log's entries (reserve.lua)
--   fixed         the first aligned window with room, before its last margin (reserve_fixed.lua)
--   token-bucket  t = max(now, blocked_until, tat - tolerance) (reserve_token_bucket.lua)
-- An estimate, not a promise: it expects the API to answer, so each call's entry is settled back to
-- its slot (settle.lua moves it to the answer less the margin, never before the slot) before the
-- rows that follow book theirs, as a seller's next rows do once its earlier rows finish. An entry
-- still at its latest count (a slot ahead, or a call not yet answered) is read at its slot, v - reach,
-- a bucket's tat is replayed over those entries, and a new slot joins the log at itself.
-- The reserve scripts stay safe when answers do not come; the estimate then is early.
-- Used by throttle.Throttle.Forecast.
--
-- KEYS[1]  the policy's log: bulkreg:{s:<seller>}:log (sliding), :fixed or :tb; ZSET as in reserve*.lua
-- KEYS[2]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs
-- KEYS[3]  the seller's hash-slot marker (slot_guard.lua): its hold, after a loss of Redis's data, delays every slot;
--          a marker not yet written (a Redis never initialised) is not foreseen
-- KEYS[4]  bulkreg:{s:<seller>}:tb:tat  STRING, token bucket only (pass it for every kind; unused otherwise)
-- ARGV[1]  L, slots per window
-- ARGV[2]  W' = window + margin, in µs
-- ARGV[3]  n, the rows to place (at most 100000)
-- ARGV[4]  kind: "sliding", "fixed" or "token-bucket"
-- ARGV[5]  sliding: reach, in µs, from a slot to its call's latest count (reserve.lua);
--          fixed: W, the API's window in µs; token bucket: the emission interval in µs
-- ARGV[6]  fixed: reach; token bucket: the tolerance in µs
-- ARGV[7]  token bucket: reach
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
local limit, win, n, kind = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local function us(x) return string.format('%.0f', x) end
if n > 100000 then
  return redis.error_reply('forecast.lua: n must be at most 100000, got ' .. n)
end

-- the slots that can still share a window with a new one, ascending
local raw = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. us(now - win), '+inf', 'WITHSCORES')
local s = {}
for i = 2, #raw, 2 do s[#s + 1] = tonumber(raw[i]) end
local held = {}
-- A sliding log and a bucket hold latest counts: a slot not begun has its latest count at or after
-- now + reach. A fixed window holds slots, and places in later windows (members id:i), which are not
-- rows of their own.
local reach = 0
if kind == 'sliding' then reach = tonumber(ARGV[5] or '0') end
if kind == 'token-bucket' then reach = tonumber(ARGV[7] or '0') end
for i, v in ipairs(s) do
  if v >= now + reach and not (kind == 'fixed' and string.find(raw[2 * i - 1], ':', 1, true)) then
    held[#held + 1] = v - reach
  end
  -- a call not yet answered (or a slot ahead) is expected to settle at its slot
  if kind ~= 'fixed' and v > now then s[i] = v - reach end
end
if kind ~= 'fixed' then table.sort(s) end
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
if kind == 'fixed' then
  -- the log's slots per aligned window, then each row in the first window with room
  local W = tonumber(ARGV[5])
  local count = {}
  for _, v in ipairs(s) do
    local k = math.floor(v / W)
    count[k] = (count[k] or 0) + 1
  end
  local earliest = math.max(now, blocked)
  local k = math.floor(earliest / W)
  if earliest >= k * W + W - (win - W) then k = k + 1 end
  for _ = 1, n - #held do
    while (count[k] or 0) >= limit do k = k + 1 end
    count[k] = (count[k] or 0) + 1
    last = math.max(last, earliest, k * W)
  end
  return {us(now), #held, us(last)}
elseif kind == 'token-bucket' then
  local T, tolerance = tonumber(ARGV[5]), tonumber(ARGV[6])
  -- the bucket replayed over the entries settled at their slots, as settle.lua replays it
  local tat = 0
  for _, v in ipairs(s) do tat = math.max(tat, v) + T end
  tat = math.max(now, math.min(tat, tonumber(string.match(redis.call('GET', KEYS[4]) or '0', '^%S+')) or 0))
  for _ = 1, n - #held do
    local at = math.max(now, blocked, math.ceil(tat - tolerance))
    tat = math.max(tat, at) + T
    last = math.max(last, at)
  end
  return {us(now), #held, us(last)}
elseif kind ~= 'sliding' then
  return redis.error_reply('forecast.lua: unknown kind ' .. tostring(kind))
end
for _ = 1, n - #held do
  local at = math.max(now, blocked)
  if #s >= limit then
    at = math.max(at, s[#s - limit + 1] + win + 1)
  end
  -- keep s sorted: a new slot is before others only while fewer than L are in the window
  local i = #s + 1
  while i > 1 and s[i - 1] > at do
    s[i] = s[i - 1]
    i = i - 1
  end
  s[i] = at
  if at > last then last = at end
end
return {us(now), #held, us(last)}
