-- settle.lua: a call the API answered: keep the log's place for it no later than needed. Used by
-- throttle.Throttle.SettleStep, in a batch (internal/scriptbatch) with the call's other writes, and
-- by Throttle.Settle on its own, for a seller's log (every policy) and for the app-wide log.
--
-- A seller's sliding log (ARGV[6] "sliding") holds each call's latest possible count (package
-- throttle's doc): the API counted the call by its answer, so the entry moves to the answer less
-- the margin (the caller passes it, never before the slot) when that is earlier (ZADD XX LT), never
-- later. Moving a latest count earlier frees room and
-- can make no booked slot unsafe, so nothing is given back and nothing is counted again. An entry
-- the log no longer holds (Redis lost it), or an answer after the entry (the API took longer than
-- the call timeout the entry assumed), blocks the log until at + W' + 1µs, the answer + W + 1µs
-- (the block key): no later slot shares a window with the call; the slots granted before are not
-- taken back.
--
-- The app-wide log (ARGV[6] "app-wide") holds slots, not latest counts: a call answered later
-- than a margin after its slot is moved to the answer less the margin (the caller passes that),
-- and every hold counts from there:
--   - the log's key lives at least until at + W' (and a second more);
--   - slots booked after the old place that no call has begun yet (after now + lead) and that now
--     share a window of W' with `limit` others are given back: their rows find them gone at Check
--     and take new ones;
--   - a slot no longer in the log is not brought back, but no new slot of the log starts before
--     at + W' + 1µs (the block key), and slots booked before that which no call has begun are
--     given back.
--
-- A fixed window (ARGV[6] "fixed") holds the call's slot and a place in every later aligned
-- window up to the one holding its latest count (reserve_fixed.lua): the places after the window
-- holding the answer go back. A token bucket (ARGV[6] "token-bucket") holds the call's latest
-- count: it moves to the answer, and tat down to the bucket replayed over the log's entries. An
-- answer after the latest count (outside what the log assumes) takes a place in each window up to
-- the answer's, or keeps tat an interval after the answer.
--
-- KEYS[1]  the log: bulkreg:{s:<seller>}:log (reserve.lua) or bulkreg:{g}:log (reserve_global.lua); :fixed, :tb; ZSET
-- KEYS[2]  optional: the log's block key (bulkreg:{s:<seller>}:block or bulkreg:{g}:block), STRING µs, as block.lua
-- KEYS[3]  token bucket: bulkreg:{s:<seller>}:tb:tat, STRING µs, as reserve_token_bucket.lua;
--          the app-wide log: optional bulkreg:{g}:given, ZSET, each slot given back (member = id,
--          score = its slot), so reserve_global.lua drops it from its seller's held set (the
--          fair shares), which this script cannot name: the slot is another seller's
-- ARGV[1]  at: the answer's time in µs on the Redis clock; less the margin (not before the slot) for a
--          sliding log, less the margin for the app-wide log
-- ARGV[2]  reservation id
-- ARGV[3]  optional: W' = window + margin, in µs (absent: only move the slot later, as a bare ZADD XX GT)
-- ARGV[4]  L, slots per window (with ARGV[3])
-- ARGV[5]  lead in µs (with ARGV[3]): slots within this of now may be checked and called already, and are kept
-- ARGV[6]  optional: the log's kind: "sliding" (a seller's log of latest counts), "app-wide" (the default),
--          "fixed" or "token-bucket"
-- ARGV[7]  fixed: W, the API's window in µs; token bucket: the emission interval in µs
-- ARGV[8]  fixed: reach, in µs, from a slot to its call's latest count; token bucket: the tolerance in µs
-- ARGV[9]  token bucket: reach
--
-- Reply: the number of booked slots given back (the app-wide log's; 0 for a seller's log).
-- A retry is harmless: an entry already at or before `at` moves nothing, a place already taken is
-- not taken twice.
local at, id = tonumber(ARGV[1]), ARGV[2]
if ARGV[6] == 'sliding' then
  -- one command on the common path: the entry moved earlier
  if redis.call('ZADD', KEYS[1], 'XX', 'LT', 'CH', ARGV[1], id) == 1 then return 0 end
  local held = redis.call('ZSCORE', KEYS[1], id)
  if held and at <= tonumber(held) then return 0 end -- there already (a retry)
  -- Not in the log (Redis lost it), or answered after the latest count the log held (the API took
  -- longer than the call timeout: outside what the log assumes): no new slot starts before
  -- at + W' + 1µs, so no call after it shares a window with this one.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local blocked = at + tonumber(ARGV[3]) + 1
  if blocked <= now then return 0 end -- the call has left the window already
  local cur = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if blocked > cur then
    redis.call('SET', KEYS[2], string.format('%.0f', blocked), 'PX', math.ceil((blocked - now) / 1000) + 1000)
  end
  return 0
end
if ARGV[6] == 'fixed' then
  local held = redis.call('ZSCORE', KEYS[1], id)
  if not held then return 0 end
  local W, reach = tonumber(ARGV[7]), tonumber(ARGV[8] or '0')
  local k0 = math.floor(tonumber(held) / W)
  local k1, last = math.floor((tonumber(held) + reach) / W), math.floor(at / W)
  if last <= k1 then
    -- counted by the answer: the places after its window go back
    for i = last - k0 + 1, k1 - k0 do redis.call('ZREM', KEYS[1], id .. ':' .. i) end
    return 0
  end
  -- answered after its latest count (outside what the log assumes): a place in every window up to
  -- the answer's, so no later call takes it
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  for k = k1 + 1, last do
    redis.call('ZADD', KEYS[1], 'NX', string.format('%.0f', k * W), id .. ':' .. (k - k0))
  end
  local need = math.ceil(((last + 1) * W - now) / 1000) + 1000
  if need > 0 and redis.call('PTTL', KEYS[1]) < need then redis.call('PEXPIRE', KEYS[1], need) end
  return 0
end
if ARGV[6] == 'token-bucket' then
  local held = redis.call('ZSCORE', KEYS[1], id)
  if not held then return 0 end
  local T = tonumber(ARGV[7])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat = tonumber(redis.call('GET', KEYS[3]) or '0')
  if at < tonumber(held) then
    redis.call('ZADD', KEYS[1], 'XX', 'LT', ARGV[1], id)
    -- The bucket replayed over the entries, in time order: each is at or after its call's count,
    -- so the replay never frees a token the API's bucket has spent. An entry before now - W' has
    -- left the API's bucket (interval + tolerance <= W').
    local r = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('%.0f', now - tonumber(ARGV[3])), '+inf', 'WITHSCORES')
    local replay = 0
    for i = 2, #r, 2 do replay = math.max(replay, tonumber(r[i])) + T end
    if replay < tat then redis.call('SET', KEYS[3], string.format('%.3f', replay), 'KEEPTTL') end
  elseif at + T > tat and at + T > now then
    -- answered after its latest count (outside what the log assumes): tat covers the answer
    redis.call('SET', KEYS[3], string.format('%.3f', at + T), 'PX', math.ceil((at + T - now) / 1000) + 1000)
  end
  return 0
end
if not ARGV[3] then
  redis.call('ZADD', KEYS[1], 'XX', 'GT', ARGV[1], id)
  return 0
end
local win, limit, lead = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function us(x) return string.format('%.0f', x) end
local given = 0
local record = KEYS[3]
-- give back the booked slot m at score x (µs)
local function giveBack(m, x)
  redis.call('ZREM', KEYS[1], m)
  given = given + 1
  if record then
    redis.call('ZADD', KEYS[3], us(x), m)
    local need = math.ceil((x - now) / 1000) + 1000
    if redis.call('PTTL', KEYS[3]) < need then redis.call('PEXPIRE', KEYS[3], need) end
  end
end

local held = redis.call('ZSCORE', KEYS[1], id)
if held then
  if at <= tonumber(held) then return 0 end
  redis.call('ZADD', KEYS[1], 'XX', 'GT', us(at), id)
  local need = math.ceil((at - now + win) / 1000) + 1000
  if redis.call('PTTL', KEYS[1]) < need then redis.call('PEXPIRE', KEYS[1], need) end
  -- The booked slots whose window of W' (ending at the slot) now holds the
  -- call and did not before, in order: each that now holds more than `limit`
  -- is given back, unless its call may have begun. Those are the slots in
  -- (held + W', at + W'] from `at` on; every other slot's window holds the
  -- call as before or no longer, so in a log that was within the limit it
  -- stays within it (and is never given back), and visiting it would cost a
  -- ZCOUNT for nothing: about L of them on every late settle
  -- (throttle.TestSettleVisitsOnlyTheSlotsItsMoveFills holds the two alike).
  local from = math.max(now + lead, tonumber(held) + win)
  local lo = '(' .. us(from)
  if at > from then lo = us(at) end
  -- A range from `at` (a settled place beyond now + lead: a call without an
  -- answer, settled at its latest count) holds the call itself, which was
  -- made and is never given back.
  local r = redis.call('ZRANGEBYSCORE', KEYS[1], lo, us(at + win), 'WITHSCORES')
  for i = 1, #r, 2 do
    local x = tonumber(r[i + 1])
    if r[i] ~= id and redis.call('ZCOUNT', KEYS[1], us(x - win), us(x)) > limit then giveBack(r[i], x) end
  end
  return given
end

-- not in the log: the log forgot a call the API counted by at + margin
local blocked = at + win + 1
if KEYS[2] and blocked > now then
  local cur = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if blocked > cur then
    redis.call('SET', KEYS[2], us(blocked), 'PX', math.ceil((blocked - now) / 1000) + 1000)
  end
end
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. us(now + lead), '(' .. us(blocked), 'WITHSCORES')
for i = 1, #r, 2 do giveBack(r[i], tonumber(r[i + 1])) end
return given
