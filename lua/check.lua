#!lua flags=no-writes
-- check.lua: are reservations' slots still good? Run right before the calls
-- they were taken for, by throttle.Throttle.Check, for every policy. The
-- slots of one seller that come due together are checked in one call.
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
-- Nothing else can make a granted slot unsafe: the reservation wrote the call's latest count, and
-- a settle only moves latest counts earlier (package throttle's doc), so the window is not counted
-- again here.
--
-- KEYS[1]  the policy's log: bulkreg:{s:<seller>}:log (sliding), :fixed or :tb; ZSET as in reserve*.lua
-- KEYS[2]  bulkreg:{<tag>}:marker  HASH, the marker of the seller's hash slot; field epoch (slot_guard.lua)
-- ARGV[1]  the first slot's reservation id; ARGV[2] the epoch it was granted in; ARGV[3], ARGV[4] the
--          next slot's, and so on: a pair per slot
--
-- Reply: {epoch, now, good1, good2, ...}
--   epoch  the hash slot's current epoch, '' when its marker is gone (its state is lost)
--   now    µs, as a string: the Redis clock when the script ran (the caller learns how far its slots are)
--   goodi  1: the epoch of pair i is current and its id still holds its slot; 0: the slot must not be used
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local epoch = redis.call('HGET', KEYS[2], 'epoch') or ''
local out = {epoch, now}
local ids = {}
for i = 1, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
local held = redis.call('ZMSCORE', KEYS[1], unpack(ids))
for i = 1, #ids do
  local good = 0
  if epoch ~= '' and epoch == ARGV[2 * i] and held[i] then good = 1 end
  out[#out + 1] = good
end
return out
