-- ledger_mark.lua: record that the registration API registered a seller's SKU. Used by ledger.Ledger.Mark.
--
-- KEYS[1]  bulkreg:{s:<seller>}:ledger   HASH: seller_sku → entry (layout in ledger_claim.lua)
-- ARGV[1]  seller_sku
-- ARGV[2]  Idempotency-Key of the row that registered it
-- ARGV[3]  content hash of the product registered
-- ARGV[4]  product id the API returned
-- ARGV[5]  retention in ms: the whole ledger expires this long after its last write
--
-- Reply: {1, entry} when marked now (whatever claim was there is replaced); {0, entry} when the SKU was
-- registered already: the first registration's entry is kept and returned. A registration is a fact,
-- so it is recorded whoever holds the claim.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, 2) == 'r\t' then
  return {0, v}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local e = table.concat({'r', ARGV[3], ARGV[2], '', ARGV[4], string.format('%d', now)}, '\t')
redis.call('HSET', KEYS[1], ARGV[1], e)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[5]))
return {1, e}
