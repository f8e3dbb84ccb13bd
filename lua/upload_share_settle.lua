-- upload_share_settle.lua: correct or remove entries of a seller's share of Redis. Used by
-- uploadstatus.Store when an upload is deleted, and when the entries whose expiry has passed (as
-- upload_share_charge.lua knew it) were looked up in their uploads' own hash slots.
--
-- KEYS[1]  bulkreg:{s:<seller>}:usage  HASH: upload id → "<bytes> <expires>" (upload_share_charge.lua)
-- ARGV[1]  the longest an upload is kept, in ms (the store's retention): the record is kept this long after
--          the expiry of an entry it corrects (see upload_share_charge.lua)
-- ARGV[2], ARGV[3]  an upload id and how long its keys still live, in ms (below 0: they are gone, and the
--          entry is removed); further pairs follow
--
-- Reply: the number of entries removed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = 0
local linger = tonumber(ARGV[1])
for i = 2, #ARGV - 1, 2 do
  local id, ttl = ARGV[i], tonumber(ARGV[i + 1])
  local cur = redis.call('HGET', KEYS[1], id)
  if cur then
    if ttl < 0 then
      redis.call('HDEL', KEYS[1], id)
      removed = removed + 1
    else
      local b = string.match(cur, '^(%d+) ') or '0'
      local e = now + ttl
      redis.call('HSET', KEYS[1], id, b .. ' ' .. string.format('%.0f', e))
      if redis.call('PEXPIRETIME', KEYS[1]) < e + linger then
        redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', e + linger))
      end
    end
  end
end
return removed
