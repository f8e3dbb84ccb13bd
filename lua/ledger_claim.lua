-- ledger_claim.lua: claim one of a seller's SKUs for a row before the row takes a throttle slot.
-- Used by ledger.Ledger.Claim.
--
-- KEYS[1]  bulkreg:{s:<seller>}:ledger   HASH: seller_sku → entry, six tab-separated fields:
--            claimed:    c, content hash, claimer's Idempotency-Key, Idempotency-Key to call with, "", lease end (ms)
--            registered: r, content hash, Idempotency-Key of the row that registered it, "", product id, marked at (ms)
-- ARGV[1]  seller_sku
-- ARGV[2]  the claiming row's own Idempotency-Key (<upload_id>:<row>)
-- ARGV[3]  the content hash of the row's product
-- ARGV[4]  lease in ms: how long the claim holds without being claimed again by its row
-- ARGV[5]  retention in ms: the whole ledger expires this long after its last write
--
-- Reply: {verdict, entry, now in ms on the Redis clock}, verdict one of
--   "call"        the row holds the claim (new, renewed, or taken over from a lapsed lease); entry is the
--                 claim, its 4th field the Idempotency-Key to call the API with. A claim taken over keeps the
--                 key its first claimer called with, so every call for one SKU uses one key and the API's
--                 idempotency turns a second call into a replay, never a second product.
--   "wait"        another row holds a live claim; entry is that claim (its lease end says until when).
--   "registered"  registered before with this content; entry names the product and the row.
--   "conflict"    registered before with other content; entry names the product.
-- A malformed entry is an error reply naming the SKU; nothing is written.
local function split(v)
  local out, i = {}, 1
  while true do
    local j = string.find(v, '\t', i, true)
    if not j then
      out[#out + 1] = string.sub(v, i)
      return out
    end
    out[#out + 1] = string.sub(v, i, j - 1)
    i = j + 1
  end
end

local sku, owner, hash = ARGV[1], ARGV[2], ARGV[3]
local lease, retention = tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowText = string.format('%.0f', now)

local function claim(callKey)
  local e = table.concat({'c', hash, owner, callKey, '', string.format('%.0f', now + lease)}, '\t')
  redis.call('HSET', KEYS[1], sku, e)
  redis.call('PEXPIRE', KEYS[1], retention)
  return {'call', e, nowText}
end

local v = redis.call('HGET', KEYS[1], sku)
if not v then
  return claim(owner)
end
local f = split(v)
if #f < 6 then
  return redis.error_reply('ledger entry of seller_sku ' .. sku .. ' is malformed: ' .. v)
end
if f[1] == 'r' then
  if f[2] == hash then
    return {'registered', v, nowText}
  end
  return {'conflict', v, nowText}
end
if f[1] ~= 'c' then
  return redis.error_reply('ledger entry of seller_sku ' .. sku .. ' has unknown state ' .. f[1])
end
if f[3] == owner or (tonumber(f[6]) or 0) <= now then
  return claim(f[4])
end
return {'wait', v, nowText}
