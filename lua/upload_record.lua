-- upload_record.lua: record rows' results in their upload, idempotently. Used by
-- uploadstatus.Store.RecordRow (the rows of one upload that finish together share a call) and
-- RecordRows.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta     HASH: fields "registered", "already_registered" and "failed" hold the counts,
--          "other_content" the failed rows among them whose SKU is registered already with other content,
--          "registered_twice" the registered rows whose SKU the marketplace now holds twice;
--          "keep_ms", when set, the upload's own retention in ms (an upload that published nothing is kept
--          less long), used instead of ARGV[1]
-- KEYS[2]  bulkreg:upload:{<id>}:states   HASH: row number → "registered" | "already_registered" | "failed"
-- KEYS[3]  bulkreg:upload:{<id>}:rows     HASH: row number → JSON of the row's result
-- KEYS[4]  bulkreg:upload:{<id>}:cells    HASH: row number → original cells (only its expiry is refreshed)
-- KEYS[5]  bulkreg:upload:{<id>}:gone     STRING: the upload's tombstone: it was deleted, or it expired and its
--          seller's share let it go (upload_share_lookup.lua, upload_delete.lua)
-- ARGV[1]  retention in ms
-- ARGV[2], ARGV[3], ARGV[4]  the first row: its number, its state ("registered", "already_registered"
--          or "failed") and the JSON of its result; every further row adds three more, in order.
--
-- Reply: how many rows changed the counts (a new row, or failed → registered); -1 when nothing was
-- recorded because the upload's tombstone is there.
-- An upload whose record is gone (its meta has no "id": Redis lost it, or it expired) still
-- gets the rows, and its meta gets "lost_at" (ms, Redis clock) once: the status then says that
-- part of it was lost instead of passing for a small upload. Unless its tombstone is there: then the
-- upload was deleted, or it expired and left its seller's share, on purpose, and a row arriving late
-- must not bring back an upload nothing is charged for; the caller logs the rows it drops.
--
-- Meta's "rows_bytes", when meta has "row_allowance" (Store.Create wrote it), is what the recorded rows
-- keep, for the seller's share (upload_share_measure.lua): each row its state and result with Redis's
-- overhead (bound below).
-- "registered" and "already_registered" are final: a later result of any state (a redelivered row whose
-- replay failed, or a row recorded again) changes nothing.
-- The same state again replaces the details (the latest attempt) without counting twice.
-- Rows are applied in order, so the same row twice in one call is the same as two calls.
--
-- Commands of each row's own (a read, two writes, a count) would be most of
-- what Redis runs per row: the rows' states are read in one HMGET, the writes
-- are one HSET per hash and one HINCRBY per count that changed, whatever the
-- number of rows.
local present = redis.call('HMGET', KEYS[1], 'id', 'lost_at', 'keep_ms', 'row_allowance')
if not present[1] and not present[2] then
  if redis.call('EXISTS', KEYS[5]) == 1 then return -1 end
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'lost_at', string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
end
local retention = tonumber(present[3] or ARGV[1]) or tonumber(ARGV[1])
local changed = 0
local function other(state, json)
  if state ~= 'failed' or not json then return 0 end
  local ok, r = pcall(cjson.decode, json)
  if ok and type(r) == 'table' and r.code == 'already_registered_other_content' then return 1 end
  return 0
end
-- unpack passes its values on Lua's stack, which holds a few thousand.
local CHUNK = 1000
local function each_chunk(list, f)
  for i = 1, #list, CHUNK do
    f(unpack(list, i, math.min(i + CHUNK - 1, #list)))
  end
end
local rows = {}
for i = 2, #ARGV - 2, 3 do rows[#rows + 1] = ARGV[i] end
local state, result = {}, {} -- row → its state and result as this call leaves them (false: none)
local read = {}
each_chunk(rows, function(...)
  local v = redis.call('HMGET', KEYS[2], ...)
  for _, s in ipairs(v) do read[#read + 1] = s end
end)
for i, row in ipairs(rows) do
  if state[row] == nil then state[row] = read[i] end
end
local delta, order = {}, {} -- count field → change, fields in the order first changed
local function count(field, d)
  if delta[field] == nil then order[#order + 1] = field; delta[field] = 0 end
  delta[field] = delta[field] + d
end
local allowance = tonumber(present[4])
-- What Redis's allocator (jemalloc) takes for n bytes: above 64, four size classes per power of two.
local function alloc(n)
  if n <= 64 then return math.ceil(n / 16) * 16 end
  local p = 64
  while p * 2 < n do p = p * 2 end
  local step = p / 4
  return math.ceil(n / step) * step
end
-- What a row keeps: its result (an sds: 4 bytes of header), two hash entries, its number twice and its
-- state (uploadstatus.rowCost counts the same).
local function bound(res)
  return alloc(#res + 4) + 2 * 48 + 32
end
local was = {} -- row → its bound before this call (0: not recorded)
local touched = {} -- rows written, in order
for i = 2, #ARGV - 2, 3 do
  local row, st, res = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local prev = state[row]
  if prev == 'registered' or prev == 'already_registered' then
    -- keep the first success's details
  else
    local d = other(st, res)
    if prev == 'failed' then
      local before = result[row]
      if before == nil then before = redis.call('HGET', KEYS[3], row) end
      d = d - other(prev, before)
    end
    if d ~= 0 then count('other_content', d) end
    -- a registered row is final (above), so it is counted once; Go writes the code without spaces
    if st == 'registered' and string.find(res, '"code":"registered_twice"', 1, true) then count('registered_twice', 1) end
    if prev ~= st then
      if prev then count(prev, -1) end
      count(st, 1)
      state[row] = st
      changed = changed + 1
    end
    if result[row] == nil then
      touched[#touched + 1] = row
      if allowance then
        was[row] = 0
        if prev == 'failed' then
          local old = redis.call('HGET', KEYS[3], row)
          if old then was[row] = bound(old) end
        end
      end
    end
    result[row] = res
  end
end
if #touched > 0 then
  local states, results = {}, {}
  for _, row in ipairs(touched) do
    states[#states + 1], states[#states + 2] = row, state[row]
    results[#results + 1], results[#results + 2] = row, result[row]
  end
  each_chunk(states, function(...) redis.call('HSET', KEYS[2], ...) end)
  each_chunk(results, function(...) redis.call('HSET', KEYS[3], ...) end)
  if allowance then
    local d = 0
    for _, row in ipairs(touched) do d = d + bound(result[row]) - was[row] end
    if d ~= 0 then count('rows_bytes', d) end
  end
end
for _, field in ipairs(order) do
  if delta[field] ~= 0 then redis.call('HINCRBY', KEYS[1], field, delta[field]) end
end
for i = 1, 4 do
  redis.call('PEXPIRE', KEYS[i], retention)
end
return changed
