-- ledger_release.lua: a row gives up its claim on a seller's SKU without having registered it.
-- Used by ledger.Ledger.Release.
--
-- KEYS[1]  bulkreg:{s:<seller>}:ledger   HASH: seller_sku → entry (layout in ledger_claim.lua)
-- KEYS[2]  bulkreg:{s:<seller>}:aside    HASH: Kafka record → dead letter's note (only with "aside")
-- ARGV[1]  seller_sku
-- ARGV[2]  the releasing row's own Idempotency-Key: only its own claim is released
-- ARGV[3]  "forget": the API refused the row's own content under the row's own key. The entry is
--          deleted only when nothing else can have been registered under that key: the call key is the
--          row's own and no other row ever held the claim with it (the shared field is "0"). Once a
--          takeover handed the key to another row, that row may have registered its own content under
--          it (a 201 whose mark never came: it crashed, or its answer was lost), so the entry is kept
--          as with "keep" and the next claimer calls with that key: a replay if it was registered.
--          "keep": end the lease but keep the entry, so the next claimer calls with the same
--          Idempotency-Key (the outcome of the calls made is unknown)
--          "aside": the row was dead-lettered. As "keep", and whether or not the row still holds the
--          claim, its Kafka record (ARGV[4]) is recorded in KEYS[2] with the dead letter's note (ARGV[5]);
--          the whole hash expires ARGV[6] ms after its last write. A re-read of that record (its offset
--          not committed when its member died) then finishes without a call (ledger_claim.lua "aside"),
--          whatever became of the SKU since, instead of registering a row that is also in the
--          dead-letter topic.
--
-- Reply: 2 when released and forgotten, 1 when released and kept, 0 when the SKU is not claimed by this
-- row (registered, claimed by another, absent).
if ARGV[3] == 'aside' then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[6]))
end
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
if ARGV[3] == 'forget' and f[4] == ARGV[2] and f[7] == '0' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 2
end
f[6] = '0'
redis.call('HSET', KEYS[1], ARGV[1], table.concat(f, '\t'))
return 1
