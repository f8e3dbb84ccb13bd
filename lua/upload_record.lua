-- upload_record.lua: record one row's result in its upload, idempotently. Used by
-- uploadstatus.Store.RecordRow.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta     HASH: fields "registered", "already_registered" and "failed" hold the counts
-- KEYS[2]  bulkreg:upload:{<id>}:states   HASH: row number → "registered" | "already_registered" | "failed"
-- KEYS[3]  bulkreg:upload:{<id>}:rows     HASH: row number → JSON of the row's result
-- KEYS[4]  bulkreg:upload:{<id>}:cells    HASH: row number → original cells (only its expiry is refreshed)
-- ARGV[1]  row number
-- ARGV[2]  state: "registered", "already_registered" or "failed"
-- ARGV[3]  JSON of the result
-- ARGV[4]  retention in ms
--
-- Reply: 1 when the counts changed (a new row, or failed → registered), 0 when they did not.
-- An upload whose record is gone (its meta has no "id": Redis lost it, or it expired) still
-- gets the row, and its meta gets "lost_at" (ms, Redis clock) once: the status then says that
-- part of it was lost instead of passing for a small upload.
-- "registered" and "already_registered" are final: a later result of any state (a redelivered row whose
-- replay failed, or a row recorded again) changes nothing.
-- The same state again replaces the details (the latest attempt) without counting twice.
if redis.call('HEXISTS', KEYS[1], 'id') == 0 and redis.call('HEXISTS', KEYS[1], 'lost_at') == 0 then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'lost_at', string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
end
local prev = redis.call('HGET', KEYS[2], ARGV[1])
local state = ARGV[2]
local retention = tonumber(ARGV[4])
local changed = 0
if prev == 'registered' or prev == 'already_registered' then
  -- keep the first success's details
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
