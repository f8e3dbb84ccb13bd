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
-- KEYS[2]  bulkreg:{circuit}:failing  HASH, per seller "n first_us last_us": its failures in a
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
-- buckets; {streak, last failure µs, now µs}: its failures in a row since its last
-- answered call (0 0 when its last call was answered); then what other sellers'
-- calls say: {failing, answered, calling}: how many other sellers failed their
-- last two calls or more, the last within the window; how many were answered two
-- buckets or more after the one the seller's streak began in (a call sent before
-- an outage and answered just after it lands in the next bucket whenever a
-- boundary falls between) and were answered last (not
-- failing now: a batch of answers from before an outage, sent with a seller's
-- first failure, is no proof that the API answers); how many have calls in the
-- window at all; finally the µs of the streak's first failure (0 without a streak).
-- Answered calls a process has not sent yet (circuit.Breaker
-- batches them) are not counted: the caller must not read a lone failure as an
-- outage.
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

-- the failing streaks: this seller's, and the other sellers failing now
local streak, first, last = 0, 0, 0
local failingNow, othersFailing = {}, 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local n, f, l = string.match(all[i + 1], '^(%d+) (%d+) (%d+)')
  n, f, l = tonumber(n or '0'), tonumber(f or '0'), tonumber(l or '0')
  if all[i] == seller then
    streak, first, last = n, f, l
  else
    failingNow[all[i]] = true
    if n >= 2 and now - l < width * buckets then othersFailing = othersFailing + 1 end
  end
end
local since = math.floor(first / width) -- the bucket the seller's streak began in

local fails, ok = 0, 0
local calling, answered = {}, {}
local ncalling, nanswered = 0, 0
for i = 0, buckets - 1 do
  local h = redis.call('HMGET', KEYS[1], i .. ':id', i .. ':fc', i .. ':ok')
  local id = tonumber(h[1] or '-1')
  if id >= 0 and id <= cur and cur - id < buckets then
    for m, c in string.gmatch(h[2] or '', '([^\t\n]+)\t(%d+)') do
      if m == seller then
        fails = fails + tonumber(c)
      elseif not calling[m] then
        calling[m] = true; ncalling = ncalling + 1
      end
    end
    for m, c in string.gmatch(h[3] or '', '([^\t\n]+)\t(%d+)') do
      if m == seller then
        ok = ok + tonumber(c)
      else
        if not calling[m] then calling[m] = true; ncalling = ncalling + 1 end
        if streak > 0 and id > since + 1 and not failingNow[m] and not answered[m] then
          answered[m] = true; nanswered = nanswered + 1
        end
      end
    end
  end
end
return {fails, ok, streak, last, now, othersFailing, nanswered, ncalling, first}
