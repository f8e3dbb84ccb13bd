#!lua flags=no-writes
-- circuit_seller.lua: how the API answers one seller's calls, read without
-- changing anything. Used by circuit.Breaker.Seller: a seller's page asks
-- whether the marketplace is failing that seller's calls while the fleet's
-- circuit stays closed (one seller's failures never open it: circuit_report.lua),
-- and whether other sellers' calls fail too (an outage the circuit has not
-- opened for yet).
--
-- KEYS[1]  bulkreg:{circuit}:window   HASH, the ring of buckets circuit_report.lua keeps
--          ("i:id" bucket number, "i:fc" transient failures and "i:ok" answered calls
--          per seller, "seller\tcount" lines)
-- KEYS[2]  bulkreg:{circuit}:state    HASH; "sick": the sellers whose failures the circuit
--          judged their own, "\n"-separated
-- KEYS[3]  bulkreg:{circuit}:failing  HASH, per seller "n first_us last_us": its failures in a
--          row since its last answered call (circuit_report.lua)
-- ARGV[1]  the window in µs
-- ARGV[2]  buckets
-- ARGV[3]  seller id
--
-- The ring's own shape ("width", "nb", written by circuit_report.lua) wins over
-- ARGV[1] and ARGV[2]: the reader (the producer) does not know the consumers'
-- --circuit-window, and read with another width every bucket looked stale.
--
-- Reply: {transient failures, answered calls} of the seller in the window's live
-- buckets, then {streak, last failure µs, now µs} (its failures in a row since its
-- last answered call, 0 0 when its last call was answered), then {others, sick}:
-- how many other sellers failed their last two calls or more, the last within the
-- window, and are not known sick; 1 when the circuit judged this seller's failures
-- its own. Answered calls a process has not sent yet (circuit.Breaker batches
-- them) are not counted: the caller must not read a lone failure as an outage.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window, buckets, seller = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local width = math.floor(window / buckets)
local shape = redis.call('HMGET', KEYS[1], 'width', 'nb')
if tonumber(shape[1] or '') and tonumber(shape[2] or '') then
  width, buckets = tonumber(shape[1]), tonumber(shape[2])
end
if width < 1 then width = 1 end
local cur = math.floor(now / width)
local fails, ok = 0, 0
local function add(lines)
  for m, c in string.gmatch(lines or '', '([^\t\n]+)\t(%d+)') do
    if m == seller then return tonumber(c) end
  end
  return 0
end
for i = 0, buckets - 1 do
  local h = redis.call('HMGET', KEYS[1], i .. ':id', i .. ':fc', i .. ':ok')
  local id = tonumber(h[1] or '-1')
  if id >= 0 and id <= cur and cur - id < buckets then
    fails = fails + add(h[2])
    ok = ok + add(h[3])
  end
end
local sick = {}
for x in string.gmatch(redis.call('HGET', KEYS[2], 'sick') or '', '[^\n]+') do sick[x] = true end
local streak, last, others = 0, 0, 0
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do
  local n, l = string.match(all[i + 1], '^(%d+) %d+ (%d+)')
  n, l = tonumber(n or '0'), tonumber(l or '0')
  if all[i] == seller then
    streak, last = n, l
  elseif n >= 2 and now - l < width * buckets and not sick[all[i]] then
    others = others + 1
  end
end
local own = 0
if sick[seller] then own = 1 end
return {fails, ok, streak, last, now, others, own}
