-- ledger_claim.lua: claim seller's SKUs for rows before the rows take throttle slots.
-- Used by ledger.Ledger.Claim (the rows of one seller that claim together share a call).
--
-- KEYS[1]  bulkreg:{s:<seller>}:ledger   HASH: seller_sku → entry, tab-separated fields:
--            claimed:    c, content hash, claimer's Idempotency-Key, Idempotency-Key to call with, "", lease end (ms),
--                        shared ("1" once a row whose own key is not the call key has held the claim: that row
--                        may have registered its content under the call key; "0" while only the key's own row
--                        has; absent in entries of older versions, read as "1")
--            registered: r, content hash, Idempotency-Key of the row that registered it, "", product id, marked at (ms)
-- KEYS[2]  bulkreg:{s:<seller>}:aside    HASH: Kafka record (<topic>/<partition>/<offset>) of a row that was
--          dead-lettered → its note (class, attempts, reason; tab-separated), written by ledger_release.lua
-- ARGV[1]  lease in ms: how long a claim holds without being claimed again by its row
-- ARGV[2]  retention in ms: the whole ledger expires this long after its last write
-- ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]  the first claim: the seller_sku in NFC (the ledger's key),
--          the SKU's NFD form when it differs ("" otherwise), the claiming row's own Idempotency-Key
--          (<upload_id>:<row>), the content hash of the row's product and the Kafka record the row was read
--          from ("" when unknown); every further claim adds five more, in order. Claims are decided in
--          order, so two rows of one SKU in one call are decided as in two calls: the first claims, the
--          second waits. An entry written before SKUs were normalised may be keyed by the NFD form: when the
--          NFC key has no entry and the NFD form has one, the entry moves to the NFC key as it is (HSET the
--          NFC key, HDEL the NFD form) and the claim is decided on it.
--
-- Reply: one string, the Redis clock's now in ms, then for each claim in order its verdict and its
-- entry, each claim as " <verdict> <bytes of the entry> <entry>" (an entry may hold any byte: its
-- length says where it ends; one string, so a client reads one value, not two per claim), the
-- verdict one of
--   "call"        the row holds the claim (new, renewed, or taken over from a lapsed lease); entry is the
--                 claim, its 4th field the Idempotency-Key to call the API with. A claim taken over keeps the
--                 key its first claimer called with, so every call for one SKU uses one key and the API's
--                 idempotency turns a second call into a replay, never a second product.
--   "wait"        another row holds a live claim; entry is that claim (its lease end says until when).
--   "registered"  registered before with this content; entry names the product and the row.
--   "conflict"    registered before with other content; entry names the product.
--   "aside"       the row was read from a Kafka record whose row was dead-lettered (its member died before
--                 committing the offset, so the record is read again); entry is the dead letter's note. No call
--                 and nothing written: the row stays set aside for an operator. A copy of the row sent again
--                 from the dead-letter topic (redrive) is another record, so it claims as usual.
--   "error"       the SKU's entry is malformed; entry is that entry, as stored. Nothing is written for
--                 that claim (an entry found under the NFD form still moves to the NFC key, unchanged),
--                 and the others are decided as usual.
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

local lease, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local leaseEnd = string.format('%d', now + lease)

-- The entries are read in one HMGET and written in one HSET, whatever the number of claims (one
-- HGET and one HSET per claim would be most of the script's commands; fewer commands per row cost Redis
-- a little less, fewer scripts per row much less). entries is the ledger as the claims decided so
-- far leave it (false: no entry), so a second claim of one SKU in the call sees the first one's.
-- A call carries at most a consumer's batch of claims (consumer.maxBatch, 256): the SKUs and the
-- pairs written go through unpack whole (Lua's stack holds a few thousand values).
local skus = {}
local records = {}
for i = 3, #ARGV - 4, 5 do
  skus[#skus + 1] = ARGV[i]
  if ARGV[i + 1] ~= '' then skus[#skus + 1] = ARGV[i + 1] end
  if ARGV[i + 4] ~= '' then records[#records + 1] = ARGV[i + 4] end
end
-- The set-aside notes of the claims' records: one HMGET, and only for claims that name their record.
local aside = {}
if #records > 0 then
  for j, v in ipairs(redis.call('HMGET', KEYS[2], unpack(records))) do
    if v then aside[records[j]] = v end
  end
end
local entries = {}
if #skus > 0 then
  for j, v in ipairs(redis.call('HMGET', KEYS[1], unpack(skus))) do
    if entries[skus[j]] == nil then entries[skus[j]] = v end
  end
end
local written, order = {}, {} -- SKU → its new entry, SKUs in the order first written
local moved = {}                -- NFD forms whose entries moved to their NFC keys

-- shared is the entry's 7th field before this claim; it turns "1" for good once a row calls with a key
-- that is not its own (a takeover), so a refusal of the key's own row can never forget the key
-- (ledger_release.lua) while another row may have registered under it.
local function claim(sku, owner, hash, callKey, shared)
  if callKey ~= owner then
    shared = '1'
  end
  local e = 'c\t' .. hash .. '\t' .. owner .. '\t' .. callKey .. '\t\t' .. leaseEnd .. '\t' .. shared
  if written[sku] == nil then order[#order + 1] = sku end
  written[sku], entries[sku] = e, e
  return 'call', e
end

local function decide(sku, alias, owner, hash)
  local v = entries[sku]
  if not v and alias ~= '' and entries[alias] then
    v = entries[alias]
    if written[sku] == nil then order[#order + 1] = sku end
    written[sku], entries[sku], entries[alias] = v, v, false
    moved[#moved + 1] = alias
  end
  if not v then
    return claim(sku, owner, hash, owner, '0')
  end
  local f = split(v)
  if #f < 6 then
    return 'error', v
  end
  if f[1] == 'r' then
    if f[2] == hash then
      return 'registered', v
    end
    return 'conflict', v
  end
  if f[1] ~= 'c' then
    return 'error', v
  end
  if f[3] == owner or (tonumber(f[6]) or 0) <= now then
    return claim(sku, owner, hash, f[4], f[7] or '1')
  end
  return 'wait', v
end

local out = {string.format('%d', now)}
for i = 3, #ARGV - 4, 5 do
  local note = ARGV[i + 4] ~= '' and aside[ARGV[i + 4]]
  if note then
    out[#out + 1] = ' aside ' .. #note .. ' ' .. note
  else
    local verdict, entry = decide(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
    out[#out + 1] = ' ' .. verdict .. ' ' .. #entry .. ' ' .. entry
  end
end
if #order > 0 then
  local fields = {}
  for _, sku in ipairs(order) do
    fields[#fields + 1], fields[#fields + 2] = sku, written[sku]
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  redis.call('PEXPIRE', KEYS[1], retention)
end
if #moved > 0 then
  redis.call('HDEL', KEYS[1], unpack(moved))
end
return table.concat(out)
