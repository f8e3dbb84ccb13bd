-- upload_record.lua: record one row's result in its upload, idempotently. Used by
-- uploadstatus.Store.RecordRow.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta     HASH: fields "registered" and "failed" hold the counts
-- KEYS[2]  bulkreg:upload:{<id>}:states   HASH: row number → "registered" | "failed"
-- KEYS[3]  bulkreg:upload:{<id>}:rows     HASH: row number → JSON of the row's result
-- KEYS[4]  bulkreg:upload:{<id>}:cells    HASH: row number → original cells (only its expiry is refreshed)
-- ARGV[1]  row number
-- ARGV[2]  state: "registered" or "failed"
-- ARGV[3]  JSON of the result
-- ARGV[4]  retention in ms
--
-- Reply: 1 when the counts changed (a new row, or failed → registered), 0 when they did not.
-- "registered" is final: a later "failed" (a redelivered row whose replay failed) changes nothing.
-- The same state again replaces the details (the latest attempt) without counting twice.
local prev = redis.call('HGET', KEYS[2], ARGV[1])
local state = ARGV[2]
local retention = tonumber(ARGV[4])
local changed = 0
if prev == 'registered' then
  -- keep the first registration's details
elseif prev == state then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
else
  if prev then
    redis.call('HINCRBY', KEYS[1], prev, -1)
  end
  redis.call('HINCRBY', KEYS[1], state, 1)
  redis.call('HSET', KEYS[2], ARGV[1], state)
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
  changed = 1
end
for i = 1, 4 do
  redis.call('PEXPIRE', KEYS[i], retention)
end
return changed
