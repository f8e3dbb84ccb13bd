-- reserve.lua: take a seller's next slot in a sliding log (policy "sliding", the default), and
-- write the call's latest possible count into the log. Used by throttle.Throttle.Reserve.
--
-- The log holds, for every call that may be counted, the latest instant the API may count it
-- (package throttle's doc states the invariant and its proof). A slot t is a send time: the call
-- is sent at t or later, and no later than t + the send bound, so the API counts it somewhere in
-- [t, t + reach], reach = the send bound + the call timeout; the log gets t + reach under the
-- id, until a settle moves it earlier, to the answer (settle.lua). Every entry e then stands for a
-- call counted somewhere in [e - reach, e], and calls counted within W' of each other have entries
-- within W' + reach: the log is a sliding log of latest counts with a window of W' + reach. The
-- slot is the earliest t >= max(now, blocked_until, hold) whose latest count t + reach fits it
-- (fits.lua, prepended, on that scale): every window of W' + reach holding t + reach holds fewer
-- than L others. That is t itself when it fits between the latest counts already booked (a slot
-- given back after its seller's next window was booked leaves such room), else
--   t = e(n-L+1) + W' + 1µs over the sorted latest counts e1 <= ... <= en.
-- The extra microsecond keeps two calls L apart strictly more than W' apart, so the API may count
-- its window closed or half-open.
--
-- KEYS[1]  bulkreg:{s:<seller>}:log    ZSET, member = reservation id, score = the call's latest possible count, µs (Redis clock)
-- KEYS[2]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs (set by block.lua after a 429)
-- KEYS[3]  bulkreg:{<tag>}:marker       HASH, the marker of the seller's hash slot (slot_guard.lua, prepended)
-- ARGV[1]  L, slots per window
-- ARGV[2]  W' = window + margin, in µs
-- ARGV[3]  max wait in µs: a slot farther ahead than this is not taken
-- ARGV[4]  reservation id (caller-generated, unique)
-- ARGV[5]  hold after a loss, in µs: how long no slot starts once Redis is found to have lost the hash slot's state
-- ARGV[6]  reach in µs: from a slot to the latest instant the API may count its call (throttle.Policy.reach)
-- ARGV[7]  optional: not before, µs on the Redis clock: the slot is at or after it (the app-wide slot a
--          throttle with an app-wide limit must match; "0" or absent: no bound)
-- ARGV[8…] optional: more reservation ids, each taking the seller's next slot after the one before
--          (the rows of a seller that ask at once share one script: throttle.Throttle.Reserve)
--
-- Reply: one line per id, in the order of the ids (ARGV[4], then ARGV[8…]), the lines joined by "\n",
-- each line seven fields joined by one space: "admitted at now in_window epoch lost hold_until" (one
-- string: a client reads one value, not seven per slot); once one id is not admitted, none after it is
--   admitted   1: the slot at `at` is held under the id; 0: nothing was written to the log
--   at         µs, as a string: the slot when admitted, else when to ask again
--   now        µs, as a string: the Redis clock when the script ran
--   in_window  the latest counts in [at - W', at + reach], this call's included: the window of
--              W' + reach ending at its latest count (0 when not admitted)
--   epoch      the epoch of the hash slot the slot was granted in
--   lost       1: this call found that Redis had lost the hash slot's state and started the hold
--   hold_until µs, as a string: the hash slot's hold ("0" when it never had one)
--
-- Idempotent per id: when the id already holds a slot (a retry of a call
-- whose answer was lost), the reply is that slot and nothing changes; its
-- hold_until is the marker's, as the lost answer had it (lost is 0: the
-- first answer told it), so a caller still learns of a hold it began.
--
-- Loss: before anything else the marker of the seller's hash slot is checked
-- (slot_guard.lua). When Redis no longer holds what it held, every seller of
-- the hash slot gets no slot before hold_until, and the epoch changes, so a
-- slot granted before is not used (check.lua). A slot outlives no Redis.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, win, maxwait = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local reach = tonumber(ARGV[6])
-- Every time here is a whole number of µs, exact in a double below 2^53: '%d' writes it as '%.0f'
-- would, without the floating-point formatting that costs Redis more than twice as much.
local function us(x) return string.format('%d', x) end
local ids = {ARGV[4]}
for i = 8, #ARGV do ids[#ids + 1] = ARGV[i] end

local held = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local out = {}
local snow = us(now)
local function reply(admitted, at, in_window, epoch, lost, hold)
  out[#out + 1] = admitted .. ' ' .. us(at) .. ' ' .. snow .. ' ' .. in_window .. ' ' .. epoch .. ' ' .. lost .. ' ' .. us(hold)
end
local epoch, hold_until, lost
local base, refused, added = nil, nil, false
local memo = {} -- earliest's, from one id to the next
local counted_at, counted -- the last id's `at` and its in_window
for i, id in ipairs(ids) do
  if held[i] then
    local at = tonumber(held[i]) - reach
    reply(1, at, redis.call('ZCOUNT', KEYS[1], us(at - win), us(at + reach)), redis.call('HGET', KEYS[3], 'epoch') or '', 0,
      tonumber(redis.call('HGET', KEYS[3], 'hold') or '0') or 0)
  elseif refused then
    reply(0, refused, 0, epoch, 0, hold_until)
  else
    if not base then
      epoch, hold_until, lost = slot_guard(KEYS[3], now, tonumber(ARGV[5]), ids[1])
      -- latest counts before now - W' can no longer share a window with a new call
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. us(now - win))
      base = now
      local not_before = tonumber(ARGV[7] or '0') or 0
      if not_before > base then base = not_before end
      local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
      if blocked > base then base = blocked end
      if hold_until > base then base = hold_until end
    end
    -- fits.lua's earliest on the latest counts' scale, a window of W' + reach
    local at = earliest(KEYS[1], limit, win + reach, base + reach, memo) - reach
    if at - now > maxwait then
      refused = at - maxwait
      reply(0, refused, 0, epoch, lost, hold_until)
    else
      local new = redis.call('ZADD', KEYS[1], us(at + reach), id)
      memo.n = memo.n + new
      added = true
      -- A burst's slots mostly share one `at`: the count after at - W' is then the one counted for
      -- the id before, and this one. Counted again only when `at` moved, or when the id was already
      -- in the log (moved, not added).
      local in_window
      if new == 1 and counted_at == at then
        in_window = counted + 1
      else
        in_window = redis.call('ZCOUNT', KEYS[1], us(at - win), us(at + reach))
      end
      counted_at, counted = at, in_window
      reply(1, at, in_window, epoch, lost, hold_until)
    end
    lost = 0 -- a loss is reported once, to the first id
  end
end
if added then
  -- the log lives until its newest latest count has left the window: an idle seller costs nothing
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local ttl = math.ceil((tonumber(newest[2]) - now + win) / 1000) + 1000
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return table.concat(out, '\n')
