#!lua flags=no-writes
-- circuit_seller.lua: one seller's calls in the circuit's window, read without
-- changing it. Used by circuit.Breaker.Seller: a seller's page asks whether
-- the marketplace is failing that seller's calls while the fleet's circuit
-- stays closed (one seller's failures never open it: circuit_report.lua).
--
-- KEYS[1]  bulkreg:{circuit}:window  HASH, the ring of buckets circuit_report.lua keeps
--          ("i:id" bucket number, "i:fc" transient failures and "i:ok" answered calls
--          per seller, "seller\tcount" lines)
-- ARGV[1]  the window in µs
-- ARGV[2]  buckets
-- ARGV[3]  seller id
--
-- The ring's own shape ("width", "nb", written by circuit_report.lua) wins over
-- ARGV[1] and ARGV[2]: the reader (the producer) does not know the consumers'
-- --circuit-window, and read with another width every bucket looked stale.
--
-- Reply: {transient failures, answered calls} of the seller in the window's live
-- buckets. Answered calls a process has not sent yet (circuit.Breaker batches
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
return {fails, ok}
