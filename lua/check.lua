#!lua flags=no-writes
-- check.lua: is a reservation's slot still good? Run right before the call it
-- was taken for, by throttle.Throttle.Check, for every policy.
--
-- A slot is good while the epoch it was granted in is the current epoch of
-- the seller's hash slot and the slot is still in the log. Either fails when
-- Redis lost the seller's state after granting it (a restart without
-- persistence, a failover to a replica that had not received it, an
-- append-only file that missed its last second): other callers may then have
-- been given the same place in the window, so the slot must not be used. A
-- slot that is still in the log of a new server (a replica that had received
-- it) is as safe as before until a reservation finds the new server and
-- changes the epoch. Writes nothing.
--
-- KEYS[1]  the policy's log: bulkreg:{s:<seller>}:log (sliding), :fixed or :tb; ZSET as in reserve*.lua
-- KEYS[2]  bulkreg:{<tag>}:marker  HASH, the marker of the seller's hash slot; field epoch (slot_guard.lua)
-- ARGV[1]  reservation id
-- ARGV[2]  the epoch the slot was granted in
--
-- Reply: {good, epoch, now}
--   good   1: the epoch is current and the id still holds its slot; 0: the slot must not be used
--   epoch  the hash slot's current epoch, '' when its marker is gone (its state is lost)
--   now    µs, as a string: the Redis clock when the script ran (the caller learns how far its slot is)
local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local epoch = redis.call('HGET', KEYS[2], 'epoch') or ''
if epoch ~= '' and epoch == ARGV[2] and redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {1, epoch, now}
end
return {0, epoch, now}
