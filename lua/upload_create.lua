-- upload_create.lua: create an upload's record unless one exists. Used by uploadstatus.Store.Create.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta    HASH: the upload's fields, its publish state and its counts
-- KEYS[2]  bulkreg:upload:{<id>}:cells   HASH: "z" → every row's original cells (uploadstatus.cellsBlob)
-- KEYS[3]  bulkreg:upload:{<id>}:gone    STRING: the tombstone of the upload deleted or expired before
--          (upload_share_lookup.lua); creating the upload again removes it
-- ARGV[1]  retention in ms (every key of the upload expires this long after its last change); the meta's
--          "keep_ms", when the caller sets it, is the same value, kept for upload_record.lua
-- ARGV[2]  n: the number of meta field/value pairs that follow
-- ARGV[3 .. 2+2n]           meta field, value, field, value, ... ("state_at" is set here, on the Redis clock)
-- ARGV[3+2n ..]             cells field, value, ... (the field "z" and its blob)
--
-- The seller's share of Redis was charged for the upload before this runs (upload_share_charge.lua, in
-- the seller's hash slot).
--
-- Reply: {} when the upload was created; otherwise the existing meta hash as a flat field/value list
-- (a duplicate: nothing is written). The meta hash can exist with counts only (a consumer recorded a
-- row first), so "exists" means the field "id" is set.
if redis.call('HEXISTS', KEYS[1], 'id') == 1 then
  return redis.call('HGETALL', KEYS[1])
end
redis.call('DEL', KEYS[3])
local retention = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
for i = 3, 2 + 2 * n, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'state_at', string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
for i = 3 + 2 * n, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], retention)
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], retention)
end
return {}
