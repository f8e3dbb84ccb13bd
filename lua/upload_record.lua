-- upload_record.lua: record rows' results in their upload, idempotently. Used by
-- uploadstatus.Store.RecordRow (the rows of one upload that finish together share a call) and
-- RecordRows.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta     HASH: fields "registered", "already_registered" and "failed" hold the counts,
--          "other_content" the failed rows among them whose SKU is registered already with other content
-- KEYS[2]  bulkreg:upload:{<id>}:states   HASH: row number → "registered" | "already_registered" | "failed"
-- KEYS[3]  bulkreg:upload:{<id>}:rows     HASH: row number → JSON of the row's result
-- KEYS[4]  bulkreg:upload:{<id>}:cells    HASH: row number → original cells (only its expiry is refreshed)
-- ARGV[1]  retention in ms
-- ARGV[2], ARGV[3], ARGV[4]  the first row: its number, its state ("registered", "already_registered"
--          or "failed") and the JSON of its result; every further row adds three more, in order.
--
-- Reply: how many rows changed the counts (a new row, or failed → registered).
-- An upload whose record is gone (its meta has no "id": Redis lost it, or it expired) still
-- gets the rows, and its meta gets "lost_at" (ms, Redis clock) once: the status then says that
-- part of it was lost instead of passing for a small upload.
-- "registered" and "already_registered" are final: a later result of any state (a redelivered row whose
-- replay failed, or a row recorded again) changes nothing.
-- The same state again replaces the details (the latest attempt) without counting twice.
-- Rows are applied in order, so the same row twice in one call is the same as two calls.
if redis.call('HEXISTS', KEYS[1], 'id') == 0 and redis.call('HEXISTS', KEYS[1], 'lost_at') == 0 then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'lost_at', string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
end
local retention = tonumber(ARGV[1])
local changed = 0
-- A failed row whose SKU is registered already with other content (code
-- already_registered_other_content) needs no fix in the file: the meta's
-- "other_content" counts them, so a list of uploads (meta only) can tell
-- them from failures. Only failed results are decoded: they are few.
local function other(state, json)
  if state ~= 'failed' or not json then return 0 end
  local ok, r = pcall(cjson.decode, json)
  if ok and type(r) == 'table' and r.code == 'already_registered_other_content' then return 1 end
  return 0
end
for i = 2, #ARGV - 2, 3 do
  local row, state, result = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local prev = redis.call('HGET', KEYS[2], row)
  if prev == 'registered' or prev == 'already_registered' then
    -- keep the first success's details
  else
    local d = other(state, result)
    if prev == 'failed' then d = d - other(prev, redis.call('HGET', KEYS[3], row)) end
    if d ~= 0 then redis.call('HINCRBY', KEYS[1], 'other_content', d) end
    if prev ~= state then
      if prev then
        redis.call('HINCRBY', KEYS[1], prev, -1)
      end
      redis.call('HINCRBY', KEYS[1], state, 1)
      redis.call('HSET', KEYS[2], row, state)
      changed = changed + 1
    end
    redis.call('HSET', KEYS[3], row, result)
  end
end
for i = 1, 4 do
  redis.call('PEXPIRE', KEYS[i], retention)
end
return changed
