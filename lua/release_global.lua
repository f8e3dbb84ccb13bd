-- release_global.lua: give back an app-wide slot (reserve_global.lua) its caller will not use:
-- the seller's slot could not be matched to it, the call was cancelled, or the API did not
-- count the call. Used by throttle.Throttle.Release and Reserve.
--
-- KEYS[1]  bulkreg:{g}:log             ZSET, as in reserve_global.lua
-- KEYS[2]  bulkreg:{g}:held:<seller>   ZSET, the seller's app-wide slots, as in reserve_global.lua
-- ARGV[1]  reservation id of the app-wide slot
--
-- Reply: 1 when the id held a slot and it was removed, 0 when it held none.
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[1])
