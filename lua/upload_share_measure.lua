-- upload_share_measure.lua: the most an upload can keep from now on, from its own record. Used by
-- uploadstatus.Store for the provisional entries of a seller's share (flag "p", upload_share_charge.lua):
-- Create charged each row not yet recorded the largest result a row can take; once rows are in, their own
-- bound is known.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta: "charge_base" (the bytes of the upload's fields, cells and published
--          rows, as Create charged them), "row_allowance" (the charge of a row not yet recorded),
--          "rows_bytes" (the bound of the rows recorded: upload_record.lua keeps it), "total" and the counts
-- ARGV[1]  none
--
-- Reply: {pttl, bytes, done}: the record's PTTL (-2: gone, -1: no expiry); bytes, the most the upload keeps
-- from now on: charge_base + rows_bytes + row_allowance for each row not recorded yet and for each failed
-- row a consumer recorded (failed less "invalid", the rows the producer refused: a later attempt may
-- replace its result with the largest a consumer records); -1 while it cannot be told (the upload is
-- still publishing: the producer records its refused rows before it publishes, so until then they are
-- not in rows_bytes; or its record lacks the charge fields). done is 1 when every row is recorded: the
-- bound then holds for good (a registered row never changes; a failed one has its headroom).
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then return {-2, -1, 0} end
local m = redis.call('HMGET', KEYS[1], 'id', 'state', 'charge_base', 'row_allowance', 'rows_bytes', 'total',
  'registered', 'already_registered', 'failed', 'invalid')
local base, allowance = tonumber(m[3]), tonumber(m[4])
if not m[1] or m[2] == 'publishing' or not base or not allowance then return {pttl, -1, 0} end
local recorded = (tonumber(m[7]) or 0) + (tonumber(m[8]) or 0) + (tonumber(m[9]) or 0)
local open = math.max(0, (tonumber(m[6]) or 0) - recorded)
local done = 0
if open == 0 then done = 1 end
local retry = math.max(0, (tonumber(m[9]) or 0) - (tonumber(m[10]) or 0))
return {pttl, base + (tonumber(m[5]) or 0) + (open + retry) * allowance, done}
