-- upload_state.lua: move an upload's publish state, only from the states the caller allows.
-- Used by uploadstatus.Store.BeginPublish and SetState.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta   HASH (field "state", "state_at" in ms on the Redis clock, "state_reason")
-- ARGV[1]  the new state
-- ARGV[2]  reason (may be empty)
-- ARGV[3]  stale age in ms: a "publishing" state whose heartbeat ("state_at", moved by every batch of
--          rows Kafka acknowledged, see upload_published.lua) is older than this was left by a producer
--          that died part way and may be taken over (0 = never). Only "publishing": a published upload is
--          never taken over however old it is, or sending the same file again would publish it twice.
-- ARGV[4 ..] states the move is allowed from ("" = no state yet)
--
-- Reply: {1, previous state} when moved; {0, current state} when not; {-1, ""} when the upload does not exist.
if redis.call('HEXISTS', KEYS[1], 'id') == 0 then
  return {-1, ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HGET', KEYS[1], 'state') or ''
local at = tonumber(redis.call('HGET', KEYS[1], 'state_at') or '0')
local ok = false
for i = 4, #ARGV do
  if ARGV[i] == cur then ok = true end
end
local stale = tonumber(ARGV[3])
if not ok and cur == 'publishing' and stale > 0 and now - at >= stale then
  ok = true
end
if not ok then
  return {0, cur}
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'state_at', string.format('%.0f', now), 'state_reason', ARGV[2])
return {1, cur}
