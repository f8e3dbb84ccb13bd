-- upload_delete.lua: delete an upload of a seller and leave its tombstone. Used by uploadstatus.Store.Delete
-- (the operator's `producer delete-upload`).
--
-- KEYS[1]     bulkreg:upload:{<id>}:meta (its "seller_id" must be ARGV[1])
-- KEYS[2..5]  bulkreg:upload:{<id>}:states, :rows, :cells, :published
-- KEYS[6]     bulkreg:upload:{<id>}:gone   STRING: the tombstone (see upload_share_lookup.lua)
-- ARGV[1]     the seller the upload must belong to
-- ARGV[2]     how long the tombstone lives, in ms
--
-- Reply: 1 deleted; 0 no such upload of that seller (nothing is changed).
--
-- The tombstone keeps a consumer's row of the deleted upload, still on its way, from bringing the upload
-- back (upload_record.lua): the operator deleted it to give the seller room.
if redis.call('HGET', KEYS[1], 'seller_id') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[6], '1', 'PX', ARGV[2])
end
return 1
