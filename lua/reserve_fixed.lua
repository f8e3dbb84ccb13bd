-- reserve_fixed.lua: take a seller's next slot under a fixed window (policy
-- "fixed"), mirroring an API that counts L calls per window [kW, (k+1)W)
-- aligned to the Unix epoch on its clock (INCR + EXPIRE on a key named by
-- floor(now / W)). Up to 2L calls can fall inside one trailing W (the end of
-- one window and the start of the next): a strict sliding-window API refuses
-- them. Used by throttle.Throttle.Reserve.
--
-- The invariant of package throttle, for aligned windows: the API counts a
-- call somewhere in [t, t + reach] (t its slot, reach = the send bound + the
-- call timeout), so the call takes a place in every aligned window from the
-- slot's to the one holding t + reach, before it is sent: the slot itself
-- (member = id) in its window and a place (member = id:i, at the start of
-- the i-th window after it) in each later one. A slot is granted only where
-- every one of those windows holds fewer than L places. A settle gives back
-- the places after the window holding the answer (settle.lua). The slots of
-- window k are kept in [kW, (k+1)W - margin) as well: a call sent at once is
-- then counted in its own window.
--
-- KEYS[1]  bulkreg:{s:<seller>}:fixed  ZSET, member = reservation id, score = slot in µs (Redis clock)
-- KEYS[2]  bulkreg:{s:<seller>}:block  STRING, blocked until, µs (set by block.lua after a 429)
-- KEYS[3]  bulkreg:{<tag>}:marker      HASH, the marker of the seller's hash slot (slot_guard.lua, prepended)
-- ARGV[1]  L, slots per window
-- ARGV[2]  W' = window + margin, in µs
-- ARGV[3]  max wait in µs: a slot farther ahead than this is not taken
-- ARGV[4]  reservation id (caller-generated, unique)
-- ARGV[5]  hold after a loss, in µs, as in reserve.lua
-- ARGV[6]  W, the API's window, in µs (less than W')
-- ARGV[7]  reach, in µs: from a slot to the latest instant the API may count its call
-- ARGV[8]  optional: not before, µs, as in reserve.lua
--
-- Reply: the line "admitted at now in_window epoch lost hold_until", as in reserve.lua (in_window counts
-- the trailing [at - W', at], so it shows when a fixed window lets more than L through).
-- Idempotent per id, and the loss of the hash slot's state is handled, as in reserve.lua.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, win, maxwait, id = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local W = tonumber(ARGV[6])
local function us(x) return string.format('%.0f', x) end
local function line(v) return table.concat(v, ' ') end

local held = redis.call('ZSCORE', KEYS[1], id)
if held then
  local at = tonumber(held)
  return line({1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at)), redis.call('HGET', KEYS[3], 'epoch') or '', 0,
    redis.call('HGET', KEYS[3], 'hold') or '0'})
end
local epoch, hold_until, lost = slot_guard(KEYS[3], now, tonumber(ARGV[5]), id)

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. us(now - win))
local earliest = now
local reach = tonumber(ARGV[7] or '0') or 0
local not_before = tonumber(ARGV[8] or '0') or 0
if not_before > earliest then earliest = not_before end
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > earliest then earliest = blocked end
if hold_until > earliest then earliest = hold_until end
local start = math.floor(earliest / W) * W
-- the last margin of a window is not used: a call slotted there could reach the API in the next one
if earliest >= start + W - (win - W) then start = start + W end
local at, k0, k1
while true do
  local first = math.max(earliest, start)
  if first - now > maxwait then
    return line({0, us(first - maxwait), us(now), 0, epoch, lost, us(hold_until)})
  end
  k0, k1 = math.floor(first / W), math.floor((first + reach) / W)
  local full
  for k = k0, k1 do
    if redis.call('ZCOUNT', KEYS[1], us(k * W), '(' .. us((k + 1) * W)) >= limit then
      full = k
      break
    end
  end
  if not full then
    at = first
    break
  end
  start = (full + 1) * W -- every slot before that window would take a place in it
end
redis.call('ZADD', KEYS[1], us(at), id)
for i = 1, k1 - k0 do
  redis.call('ZADD', KEYS[1], us((k0 + i) * W), id .. ':' .. i)
end
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local ttl = math.ceil((tonumber(newest[2]) - now + win) / 1000) + 1000
redis.call('PEXPIRE', KEYS[1], ttl)
return line({1, us(at), us(now), redis.call('ZCOUNT', KEYS[1], us(at - win), us(at)), epoch, lost, us(hold_until)})
