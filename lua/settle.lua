-- settle.lua: a call the API answered: move the log's entry for it no later than needed. Used by
-- throttle.Throttle.SettleStep, in a batch (internal/scriptbatch) with the call's other writes, and
-- by Throttle.Settle on its own, for a seller's log (every policy) and for the app-wide log.
--
-- A sliding log (ARGV[4] "sliding": a seller's log or the app-wide log) holds each call's latest
-- possible count (package throttle's doc): the API counted the call by its answer, so the entry
-- moves to the answer less the margin (the caller passes it, never before the slot) when that is
-- earlier (ZADD XX LT), never later. Moving a latest count earlier frees room and can make no
-- booked slot unsafe, so nothing is given back and nothing is counted again. An entry the log no
-- longer holds (Redis lost it), or an answer after the entry (the API took longer than the call
-- timeout the entry assumed), blocks the log until at + W' + 1µs, the answer + W + 1µs (the block
-- key): no later slot shares a window with the call; the slots granted before are not taken back.
--
-- A fixed window (ARGV[4] "fixed") holds the call's slot and a place in every later aligned
-- window up to the one holding its latest count (reserve_fixed.lua): the places after the window
-- holding the answer go back. A token bucket (ARGV[4] "token-bucket") holds the call's latest
-- count: it moves to the answer, and tat down to the bucket replayed over the log's entries. An
-- answer after the latest count (outside what the log assumes) takes a place in each window up to
-- the answer's, or keeps tat an interval after the answer.
--
-- KEYS[1]  the log: bulkreg:{s:<seller>}:log (reserve.lua) or bulkreg:{g}:log (reserve_global.lua); :fixed, :tb; ZSET
-- KEYS[2]  the log's block key (bulkreg:{s:<seller>}:block or bulkreg:{g}:block), STRING µs, as block.lua
-- KEYS[3]  token bucket: bulkreg:{s:<seller>}:tb:tat, STRING µs, as reserve_token_bucket.lua
-- ARGV[1]  at: the answer's time in µs on the Redis clock; less the margin, never before the slot,
--          for a sliding log
-- ARGV[2]  reservation id
-- ARGV[3]  W' = window + margin, in µs
-- ARGV[4]  the log's kind: "sliding", "fixed" or "token-bucket"
-- ARGV[5]  fixed: W, the API's window in µs; token bucket: the emission interval in µs
-- ARGV[6]  fixed: reach, in µs, from a slot to its call's latest count
-- ARGV[5…] sliding: more calls' settles of the same log, four values each like ARGV[1…4]
--
-- Reply: sliding, a 0 per call; otherwise 0. A retry is harmless: an entry already at or before
-- `at` moves nothing, a place already taken is not taken twice.
local at, id = tonumber(ARGV[1]), ARGV[2]
if ARGV[4] == 'sliding' then
  -- ARGV holds one group of four per call (throttle.Throttle.SettleStep puts a batch's settles of one log in one step): one
  -- ZADD moves every entry earlier on the common path
  local n = #ARGV / 4
  local z, out = {'XX', 'LT', 'CH'}, {}
  for g = 0, n - 1 do
    z[#z + 1], z[#z + 2] = ARGV[4 * g + 1], ARGV[4 * g + 2]
    out[g + 1] = 0
  end
  if redis.call('ZADD', KEYS[1], unpack(z)) == n then return out end
  local ids = {}
  for g = 0, n - 1 do ids[g + 1] = ARGV[4 * g + 2] end
  local held = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  local blocked = 0
  for g = 0, n - 1 do
    local a = tonumber(ARGV[4 * g + 1])
    -- Not in the log (Redis lost it), or answered after the latest count the log held (the API
    -- took longer than the call timeout: outside what the log assumes): no new slot starts before
    -- at + W' + 1µs, so no call after it shares a window with this one. An entry at or before `at`
    -- is there already (a retry, or moved by this ZADD).
    if not held[g + 1] or a > tonumber(held[g + 1]) then
      blocked = math.max(blocked, a + tonumber(ARGV[4 * g + 3]) + 1)
    end
  end
  if blocked == 0 then return out end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if blocked <= now then return out end -- the calls have left the window already
  local cur = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if blocked > cur then
    redis.call('SET', KEYS[2], string.format('%.0f', blocked), 'PX', math.ceil((blocked - now) / 1000) + 1000)
  end
  return out
end
if ARGV[4] == 'fixed' then
  local held = redis.call('ZSCORE', KEYS[1], id)
  if not held then return 0 end
  local W, reach = tonumber(ARGV[5]), tonumber(ARGV[6] or '0')
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
if ARGV[4] == 'token-bucket' then
  local held = redis.call('ZSCORE', KEYS[1], id)
  if not held then return 0 end
  local T = tonumber(ARGV[5])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat, base = 0, 0
  local state = redis.call('GET', KEYS[3])
  if state then
    local a, b = string.match(state, '^(%S+)%s*(%S*)$')
    tat, base = tonumber(a) or 0, tonumber(b) or 0
  end
  if at < tonumber(held) then
    redis.call('ZADD', KEYS[1], 'XX', 'LT', ARGV[1], id)
    -- The bucket replayed over every entry of the log, in time order, from the bucket the entries
    -- that left it left behind (base, reserve_token_bucket.lua): each entry is at or after its
    -- call's count, so the replay never frees a token the API's bucket has spent.
    local r = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
    local replay = base
    for i = 2, #r, 2 do replay = math.max(replay, tonumber(r[i])) + T end
    if replay < tat then redis.call('SET', KEYS[3], string.format('%.3f %.3f', replay, base), 'KEEPTTL') end
  elseif at + T > tat and at + T > now then
    -- answered after its latest count (outside what the log assumes): tat covers the answer
    redis.call('SET', KEYS[3], string.format('%.3f %.3f', at + T, base), 'PX',
      math.ceil((at + T - now + tonumber(ARGV[3])) / 1000) + 1000)
  end
  return 0
end
return redis.error_reply('settle.lua: unknown kind ' .. tostring(ARGV[4]))
