-- ledger_mark.lua: record that the registration API registered a seller's SKU. Used by ledger.Ledger.Mark
-- and, for the SKUs of a batch of calls at once, ledger.Ledger.MarkStep (one step of a scriptbatch).
--
-- KEYS[1]  bulkreg:{s:<seller>}:ledger   HASH: seller_sku → entry (layout in ledger_claim.lua)
-- ARGV[1]  seller_sku
-- ARGV[2]  Idempotency-Key of the row that registered it
-- ARGV[3]  content hash of the product registered
-- ARGV[4]  product id the API returned
-- ARGV[5]  retention in ms: the whole ledger expires this long after its last write
-- ARGV[6…] optional: more marks, five values each like ARGV[1…5], marked in that order (a SKU marked
--          twice in one call: the second sees the first's registration)
--
-- Reply: one string, for each mark in order " <marked> <bytes of the entry> <entry>" (as the claim
-- script answers: one value for the client to read, not two per mark). marked is 1 when marked now
-- (whatever claim was there is replaced); 0 when the SKU was registered already: the first
-- registration's entry is kept and returned. A registration is a fact, so it is recorded whoever
-- holds the claim.
--
-- One HMGET, one TIME, one HSET and one PEXPIRE however many marks: were each to run its own four,
-- per-command cost would be most of what a mark costs Redis.
local skus = {}
for i = 1, #ARGV, 5 do skus[#skus + 1] = ARGV[i] end
local held = redis.call('HMGET', KEYS[1], unpack(skus))
local now, ttl
local set, by, out = {}, {}, {}
for m, sku in ipairs(skus) do
  local i = 5 * (m - 1)
  local v = by[sku] or held[m]
  if v and string.sub(v, 1, 2) == 'r\t' then
    out[#out + 1] = ' 0 ' .. #v .. ' ' .. v
  else
    if not now then
      local t = redis.call('TIME')
      now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    end
    local e = 'r\t' .. ARGV[i + 3] .. '\t' .. ARGV[i + 2] .. '\t\t' .. ARGV[i + 4] .. '\t' .. now
    by[sku] = e
    set[#set + 1], set[#set + 2] = sku, e
    out[#out + 1] = ' 1 ' .. #e .. ' ' .. e
    local r = tonumber(ARGV[i + 5])
    if not ttl or r > ttl then ttl = r end
  end
end
if #set > 0 then
  redis.call('HSET', KEYS[1], unpack(set))
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return table.concat(out)
