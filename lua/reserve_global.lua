-- reserve_global.lua: take a slot under the app-wide limit (throttle.Policy.Global), a
-- sliding log of latest counts for the whole application, as reserve.lua is per seller,
-- shared fairly between the sellers waiting for it. Used by throttle.Throttle.Reserve after
-- the seller's own slot (reserve.lua) is taken: the two logs live under different hash tags
-- (on Redis Cluster, on different nodes), so no one script can take both.
--
-- The invariant of package throttle, as in reserve.lua: the log holds, for every call that may be
-- counted, the latest instant the API may count it, written here before the call is sent (slot +
-- reach; a settle only moves it earlier, settle.lua). The slot is the earliest
-- t >= max(now, not_before, blocked_until, hold_until) whose latest count t + reach fits a window
-- of W' + reach on the log's latest counts (fits.lua, prepended): t itself when it fits between
-- the entries already booked, else e(n-G+1) + W' + 1µs - reach over the sorted entries.
--
-- Fairness (max-min between the sellers waiting): a seller counts as waiting while it asked
-- within the grace, or was refused below and told to come back (then until that time + the
-- grace). With n waiting, a seller may hold at most ceil(G / n) app-wide slots that have not
-- begun; asking for one more ahead (not due now) is refused (capped) and answered with one of the seller's held slots,
-- picked by the request's id so its rows come back spread over them: as each held slot begins,
-- a row takes the place it frees, and the seller's share stays booked ahead.
-- A seller with 10 rows therefore books them ahead of a seller with 500, whose share of the
-- slots ahead is capped; a share a seller does not use (it has fewer rows) is taken by whoever
-- asks, since slots that have begun no longer count.
--
-- KEYS[1]  bulkreg:{g}:log             ZSET, member = reservation id, score = the call's latest possible count, µs (Redis clock)
-- KEYS[2]  bulkreg:{g}:block           STRING, blocked until, µs (block.lua after an app-wide 429)
-- KEYS[3]  bulkreg:{g}:waiting         ZSET, member = seller id, score = until when it counts as waiting, µs
-- KEYS[4]  bulkreg:{g}:held:<seller>   ZSET, the seller's app-wide slots (member = id, score = slot), for its share
-- KEYS[5]  bulkreg:{<tag>}:marker      HASH, the marker of the hash slot of {g} (slot_guard.lua, prepended)
-- ARGV[1]  G, app-wide slots per window
-- ARGV[2]  W' = app-wide window + margin, in µs
-- ARGV[3]  max wait in µs: a slot farther ahead than this is not taken
-- ARGV[4]  reservation id (caller-generated, unique)
-- ARGV[5]  hold after a loss, in µs, as in reserve.lua
-- ARGV[6]  not before, µs on the Redis clock: the seller's slot; "0": no bound
-- ARGV[7]  seller id
-- ARGV[8]  grace in µs: how long after its last ask (or the time it was told to come back) a seller counts as waiting
-- ARGV[9]  replace: the id of an app-wide slot this reservation held before, given back first ("" = none)
-- ARGV[10] reach in µs: from a slot to the latest instant the API may count its call (throttle.Policy.reach)
--
-- Reply: {admitted, at, now, in_window, epoch, lost, hold_until, capped, waiting, share}
--   admitted .. hold_until   as in reserve.lua (in_window: the latest counts in [at - W', at + reach])
--   capped     1: refused because the seller holds its share of the slots ahead; `at` is one of its held slots
--   waiting    sellers counted as waiting, this one included
--   share      ceil(G / waiting): the most app-wide slots ahead one seller may hold
--
-- Idempotent per id, as reserve.lua; the replaced id is removed once either way.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, win, maxwait, id = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local not_before, seller, grace, replace = tonumber(ARGV[6]) or 0, ARGV[7], tonumber(ARGV[8]), ARGV[9] or ''
local reach = tonumber(ARGV[10] or '0') or 0
local function us(x) return string.format('%d', x) end
-- a key lives until its newest score is `extra` µs in the past, and a second more
local function expire(key, extra)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] then
    redis.call('PEXPIRE', key, math.max(1, math.ceil((tonumber(newest[2]) - now + extra) / 1000)) + 1000)
  end
end

if replace ~= '' then
  redis.call('ZREM', KEYS[1], replace)
  redis.call('ZREM', KEYS[4], replace)
end
local held = redis.call('ZSCORE', KEYS[1], id)
if held then
  local at = tonumber(held) - reach
  local waiting = math.max(1, redis.call('ZCOUNT', KEYS[3], us(now), '+inf'))
  return {1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at + reach)), redis.call('HGET', KEYS[5], 'epoch') or '',
    0, redis.call('HGET', KEYS[5], 'hold') or '0', 0, waiting, math.ceil(limit / waiting)}
end
local epoch, hold_until, lost = slot_guard(KEYS[5], now, tonumber(ARGV[5]), id)

redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. us(now))
redis.call('ZADD', KEYS[3], 'GT', us(now + grace), seller)
local waiting = redis.call('ZCARD', KEYS[3])
local share = math.ceil(limit / waiting)

-- latest counts before now - W' can no longer share a window with a new call
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. us(now - win))
local at = now
if not_before > at then at = not_before end
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > at then at = blocked end
if hold_until > at then at = hold_until end
-- fits.lua's earliest on the latest counts' scale, a window of W' + reach
at = earliest(KEYS[1], limit, win + reach, at + reach) - reach

-- the share caps slots held ahead only: a slot due now holds nothing ahead
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', us(now))
local mine = redis.call('ZCARD', KEYS[4])
if at > now and mine >= share then
  -- Capped. The seller's refused rows come back at its held slots, spread over them by their
  -- (random) ids: as each held slot begins a row or two ask again and one takes the place it
  -- frees, so a capped seller keeps its share booked ahead without all its rows asking at once.
  local h = 0
  for i = 1, #id do h = (h * 31 + string.byte(id, i)) % 1000003 end
  local pick = redis.call('ZRANGE', KEYS[4], h % mine, h % mine, 'WITHSCORES')
  local newest = tonumber(redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2])
  redis.call('ZADD', KEYS[3], 'GT', us(newest + grace), seller)
  expire(KEYS[3], 0)
  return {0, pick[2], us(now), 0, epoch, lost, us(hold_until), 1, waiting, share}
end
expire(KEYS[3], 0)
if at - now > maxwait then
  return {0, us(at - maxwait), us(now), 0, epoch, lost, us(hold_until), 0, waiting, share}
end
redis.call('ZADD', KEYS[1], us(at + reach), id)
redis.call('ZADD', KEYS[4], us(at), id)
-- the log lives until its newest latest count has left the window
expire(KEYS[1], win)
expire(KEYS[4], 0)
return {1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at + reach)), epoch, lost, us(hold_until), 0, waiting, share}
