-- upload_requeue.lua: move one row of an upload from failed back to waiting,
-- for a redrive that publishes it again. Used by uploadstatus.Store.Requeue.
--
-- Only a failed row moves: a row that is waiting (already requeued, or never
-- recorded) or registered is left alone, so two redrives of the same dead
-- letter publish it once.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta     HASH: field "failed" holds the count of failed rows, "other_content" those of them
--          whose SKU is registered already with other content, "rows_bytes" what the recorded rows keep
--          (upload_record.lua)
-- KEYS[2]  bulkreg:upload:{<id>}:states   HASH: row number → state
-- KEYS[3]  bulkreg:upload:{<id>}:rows     HASH: row number → JSON of the row's result
-- KEYS[4]  bulkreg:upload:{<id>}:cells    HASH: row number → original cells (only its expiry is refreshed)
-- ARGV[1]  row number
-- ARGV[2]  retention in ms
--
-- Reply: {1, "failed", JSON of the failed result} when requeued (the row is waiting now);
-- {0, state, ""} when the row is not failed (state "" means waiting); {-1, "", ""} when
-- Redis knows no such upload (never created, or expired).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, '', ''}
end
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if prev ~= 'failed' then
  return {0, prev or '', ''}
end
local result = redis.call('HGET', KEYS[3], ARGV[1]) or ''
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'failed', -1)
-- what the row kept leaves "rows_bytes", as upload_record.lua counted it
if redis.call('HEXISTS', KEYS[1], 'row_allowance') == 1 then
  local n = #result + 4
  local c = math.ceil(n / 16) * 16
  if n > 64 then
    local p = 64
    while p * 2 < n do p = p * 2 end
    c = math.ceil(n / (p / 4)) * (p / 4)
  end
  redis.call('HINCRBY', KEYS[1], 'rows_bytes', -(c + 2 * 48 + 32))
end
-- the failed rows registered already with other content are counted apart too (upload_record.lua)
local ok, r = pcall(cjson.decode, result)
if ok and type(r) == 'table' and r.code == 'already_registered_other_content' then
  redis.call('HINCRBY', KEYS[1], 'other_content', -1)
end
for i = 1, 4 do
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2]))
end
return {1, 'failed', result}
