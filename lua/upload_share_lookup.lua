-- upload_share_lookup.lua: what is left of an upload whose share entry is due, and a tombstone when nothing
-- is. Used by uploadstatus.Store when a seller's share entries are past the expiry they knew
-- (upload_share_charge.lua); the answer goes to upload_share_settle.lua in the seller's slot.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta
-- KEYS[2]  bulkreg:upload:{<id>}:gone   STRING: the upload's tombstone (upload_record.lua records no row while
--          it exists and the upload's record does not; upload_create.lua removes it)
-- ARGV[1]  how long a tombstone lives, in ms
-- ARGV[2]  "1": the entry charged an upload, so make a tombstone if nothing of it is left; "0": the entry
--          charged a tombstone only
--
-- Reply: {"u", ms}: the upload's record is there (a late row may have moved its expiry), its PTTL (-1: no
-- expiry); {"g", ms}: its tombstone is there (made now, or before), its PTTL; {"x", -2}: nothing is left.
--
-- The look-up and the tombstone are one step: a row recorded between them would otherwise bring the
-- upload back uncharged.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'u', redis.call('PTTL', KEYS[1])}
end
local pttl = redis.call('PTTL', KEYS[2])
if pttl ~= -2 then
  return {'g', pttl}
end
if ARGV[2] == '1' and tonumber(ARGV[1]) > 0 then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
  return {'g', tonumber(ARGV[1])}
end
return {'x', -2}
