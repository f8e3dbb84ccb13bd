-- upload_share_settle.lua: correct, turn into a tombstone's charge, or remove entries of a seller's share
-- of Redis. Used by uploadstatus.Store when an upload is deleted, when the entries whose expiry has passed
-- (as upload_share_charge.lua knew it) were looked up in their uploads' own hash slots
-- (upload_share_lookup.lua), and when provisional entries were measured there.
--
-- KEYS[1]  bulkreg:{s:<seller>}:usage  HASH: upload id → "<bytes> <expires>[ <flag>]"
--          (upload_share_charge.lua)
-- ARGV[1]  the longest an upload is kept, in ms (the store's retention): the record is kept this long after
--          the expiry of an entry it corrects (see upload_share_charge.lua)
-- ARGV[2..6]  one entry: the upload id; the entry's value as the caller read it ("" = the caller saw no
--          entry); how long the upload's keys (or its tombstone) still live, in ms (below 0: nothing of it is
--          left, and the entry is removed); the bytes the entry charges from now on ("" = as it charges now);
--          its flag from now on ("-" = none, "" = as it is now). Further entries follow, five values each.
--
-- Compare and set: an entry is changed only while it still holds the value the caller read. Between the
-- caller's look-up and this script the seller may send the same file again (upload_share_charge.lua
-- replaces the entry with a fresh charge): that charge is kept. An entry the caller saw absent is only
-- ever added (a deleted upload's tombstone), never replaced.
--
-- The record's own expiry is read with PTTL and TIME, so the script runs where PEXPIRETIME is renamed away.
--
-- Reply: the number of entries removed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = 0
local linger = tonumber(ARGV[1])
local function extend(e)
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 or now + pttl < e + linger then
    redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', e + linger))
  end
end
for i = 2, #ARGV - 4, 5 do
  local id, seen, ttl, bytes, flag = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4]
  local cur = redis.call('HGET', KEYS[1], id)
  local same = (seen == '' and not cur) or (seen ~= '' and cur == seen)
  if same then
    if ttl < 0 then
      if cur then
        redis.call('HDEL', KEYS[1], id)
        removed = removed + 1
      end
    else
      local b, f = '0', ''
      if cur then
        local cb, _, cf = string.match(cur, '^(%d+) (%d+) ?(%a*)$')
        b, f = cb or '0', cf or ''
      end
      if bytes ~= '' then b = bytes end
      if flag == '-' then f = '' elseif flag ~= '' then f = flag end
      local e = now + ttl
      local v = b .. ' ' .. string.format('%.0f', e)
      if f ~= '' then v = v .. ' ' .. f end
      if cur or b ~= '0' then
        redis.call('HSET', KEYS[1], id, v)
        extend(e)
      end
    end
  end
end
return removed
