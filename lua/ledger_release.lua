-- ledger_release.lua: a row gives up its claim on a seller's SKU without having registered it.
-- Used by ledger.Ledger.Release.
--
-- KEYS[1]  bulkreg:{s:<seller>}:ledger   HASH: seller_sku → entry (layout in ledger_claim.lua)
-- ARGV[1]  seller_sku
-- ARGV[2]  the releasing row's own Idempotency-Key: only its own claim is released
-- ARGV[3]  "forget": delete the entry (the API refused the row's own content, so nothing can be
--          registered under the key it called with); "keep": end the lease but keep the entry, so the
--          next claimer calls with the same Idempotency-Key (the outcome of the calls made is unknown)
--
-- Reply: 1 when released, 0 when the SKU is not claimed by this row (registered, claimed by another, absent).
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v or string.sub(v, 1, 2) ~= 'c\t' then
  return 0
end
local f, i = {}, 1
while true do
  local j = string.find(v, '\t', i, true)
  if not j then
    f[#f + 1] = string.sub(v, i)
    break
  end
  f[#f + 1] = string.sub(v, i, j - 1)
  i = j + 1
end
if f[3] ~= ARGV[2] then
  return 0
end
if ARGV[3] == 'forget' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
f[6] = '0'
redis.call('HSET', KEYS[1], ARGV[1], table.concat(f, '\t'))
return 1
