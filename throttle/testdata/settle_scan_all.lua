-- The sliding give-back of lua/settle.lua as of c3bb037, which ran a ZCOUNT for every slot
-- booked within W' after the settled place: kept to hold the new one to the same give-backs
-- (TestSettleVisitsOnlyTheSlotsItsMoveFills) and to measure both (BenchmarkSettle). Only the
-- path those two run is kept (a seller's sliding log, the call's slot still in it); the
-- other kinds and the forgotten slot are settle.lua's alone.
--
-- KEYS[1]  the log, ZSET, member = reservation id, score = slot in µs
-- ARGV[1]  at: the answer's time in µs on the Redis clock, less the margin
-- ARGV[2]  reservation id (in the log)
-- ARGV[3]  W' = window + margin, in µs
-- ARGV[4]  L, slots per window
-- ARGV[5]  lead in µs: slots within this of now may be checked and called already, and are kept
--
-- Reply: the number of booked slots given back.
local at, id = tonumber(ARGV[1]), ARGV[2]
local win, limit, lead = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function us(x) return string.format('%.0f', x) end
local held = redis.call('ZSCORE', KEYS[1], id)
if not held then return redis.error_reply('settle_scan_all.lua: the slot is not in the log') end
if at <= tonumber(held) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', 'GT', us(at), id)
local need = math.ceil((at - now + win) / 1000) + 1000
if redis.call('PTTL', KEYS[1]) < need then redis.call('PEXPIRE', KEYS[1], need) end
-- the booked slots within W' after `at`, in order: each that now closes a
-- window of W' holding more than `limit` is given back, unless its call may have begun
local given = 0
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. us(now + lead), us(at + win), 'WITHSCORES')
for i = 1, #r, 2 do
  local x = tonumber(r[i + 1])
  if redis.call('ZCOUNT', KEYS[1], us(x - win), us(x)) > limit then
    redis.call('ZREM', KEYS[1], r[i])
    given = given + 1
  end
end
return given
