-- reserve_token_bucket.lua: take a seller's next slot under a token bucket
-- (policy "token-bucket"), mirroring an API whose bucket holds B tokens and
-- refills L per window: GCRA with emission interval T = W/L and tolerance
-- tau = (B-1)T. Calls reach the API with up to the margin of spread, so the
-- throttle runs GCRA with the tolerance less the margin (or, when tau is
-- smaller than the margin, the interval plus what is missing): throttle.Policy
-- computes both. In the W after a burst up to B + L calls fall: a strict
-- sliding-window API refuses them. Used by throttle.Throttle.Reserve.
--
-- GCRA: with tat the theoretical arrival time (tat >= now), the slot is
-- t = max(now, blocked_until, tat - tolerance). The invariant of package
-- throttle, for a bucket: the API counts a call somewhere in [t, t + reach]
-- (reach = the send bound + the call timeout), so tat covers the latest
-- count, max(tat, t + reach) + interval, and the log holds t + reach under
-- the id, before the call is sent. A settle moves that entry earlier, to the
-- answer, and tat down to the bucket replayed over the log's entries
-- (settle.lua): every entry is at or after its call's count, so a bucket
-- replayed over entries never holds a token the API's has spent.
--
-- KEYS[1]  bulkreg:{s:<seller>}:tb      ZSET, member = reservation id, score = the call's latest count in µs
--          (Redis clock); kept for idempotency, Release, Settle and the in-window count
-- KEYS[2]  bulkreg:{s:<seller>}:block   STRING, blocked until, µs (set by block.lua after a 429)
-- KEYS[3]  bulkreg:{s:<seller>}:tb:tat  STRING, "tat base" in µs (fractional): tat, and the bucket the
--          entries that have left the log (older than W') left behind them, folded in as they leave
--          (settle.lua replays the log's entries from it; a value of tat alone reads as base 0)
-- KEYS[4]  bulkreg:{<tag>}:marker       HASH, the marker of the seller's hash slot (slot_guard.lua, prepended)
-- ARGV[1]  L, slots per window
-- ARGV[2]  W' = window + margin, in µs
-- ARGV[3]  max wait in µs: a slot farther ahead than this is not taken
-- ARGV[4]  reservation id (caller-generated, unique)
-- ARGV[5]  hold after a loss, in µs, as in reserve.lua
-- ARGV[6]  the emission interval in µs (fractional)
-- ARGV[7]  the tolerance in µs (fractional)
-- ARGV[8]  reach, in µs: from a slot to the latest instant the API may count its call
-- ARGV[9]  optional: not before, µs, as in reserve.lua
--
-- Reply: the line "admitted at now in_window epoch lost hold_until", as in reserve.lua. Idempotent per
-- id, and the loss of the hash slot's state is handled, as in reserve.lua.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, win, maxwait, id = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local T, tolerance = tonumber(ARGV[6]), tonumber(ARGV[7])
local function us(x) return string.format('%.0f', x) end
local function line(v) return table.concat(v, ' ') end

local reach = tonumber(ARGV[8] or '0') or 0
local held = redis.call('ZSCORE', KEYS[1], id)
if held then
  local at = tonumber(held) - reach
  return line({1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at + reach)), redis.call('HGET', KEYS[4], 'epoch') or '', 0,
    redis.call('HGET', KEYS[4], 'hold') or '0'})
end
local epoch, hold_until, lost = slot_guard(KEYS[4], now, tonumber(ARGV[5]), id)

local tat, base = 0, 0
local state = redis.call('GET', KEYS[3])
if state then
  local a, b = string.match(state, '^(%S+)%s*(%S*)$')
  tat, base = tonumber(a) or 0, tonumber(b) or 0
end
if tat < now then tat = now end
local at = math.ceil(tat - tolerance)
if at < now then at = now end
local not_before = tonumber(ARGV[9] or '0') or 0
if not_before > at then at = not_before end
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > at then at = blocked end
if hold_until > at then at = hold_until end
-- Entries more than an interval after now are the latest counts of calls not yet answered (a
-- settled entry is at its answer: in the past, or within the few ms its estimate from above may
-- run ahead of this clock). A slot they push back is up to a reach later than one booked after
-- their answers, and nothing brings it earlier once it is booked: a slot they push back by more
-- than an interval is not taken (asking again an interval later costs less). The answer says when
-- to ask again: the slot the bucket would give with those calls counted at their slots (their
-- answers cannot place it earlier), or, when that has come and they are still unanswered, an
-- interval on.
local open = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. us(now + T), '+inf', 'LIMIT', 0, 1)
if #open > 0 then
  local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  local s = {}
  for i = 2, #all, 2 do
    local v = tonumber(all[i])
    if v > now + T then v = v - reach end
    s[#s + 1] = v
  end
  table.sort(s)
  local replay = base
  for _, v in ipairs(s) do replay = math.max(replay, v) + T end
  local opt = math.max(now, not_before, blocked, hold_until, math.ceil(math.min(tat, replay) - tolerance))
  if at - opt > T then
    local again = opt
    if again <= now then again = now + math.ceil(T) end
    return line({0, us(again), us(now), 0, epoch, lost, us(hold_until)})
  end
end
if at - now > maxwait then
  return line({0, us(at - maxwait), us(now), 0, epoch, lost, us(hold_until)})
end
tat = math.max(tat, at + reach) + T
-- The entries older than W' leave the log: the bucket they leave behind is folded into base, so a
-- settle's replay of the entries still in the log starts from it (a stream of calls at the full
-- rate keeps the bucket as drained as it was, however old the calls that drained it).
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. us(now - win), 'WITHSCORES')
for i = 2, #old, 2 do base = math.max(base, tonumber(old[i])) + T end
if #old > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. us(now - win)) end
-- a full bucket needs no state: the key expires once the bucket is full again (tat + W' is past
-- tat + tolerance), and base with it
redis.call('SET', KEYS[3], string.format('%.3f %.3f', tat, base), 'PX', math.ceil((tat - now + win) / 1000) + 1000)
redis.call('ZADD', KEYS[1], us(at + reach), id)
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local ttl = math.ceil((tonumber(newest[2]) - now + win) / 1000) + 1000
redis.call('PEXPIRE', KEYS[1], ttl)
return line({1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at + reach)), epoch, lost, us(hold_until)})
