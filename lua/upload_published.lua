-- upload_published.lua: record rows of an upload that Kafka acknowledged, and beat the publisher's heart.
-- Used by uploadstatus.Store.MarkPublished; uploadstatus.Store.PublishedRows reads the bitmap back.
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta       HASH (fields "id", "state", "state_at" in ms on the Redis clock)
-- KEYS[2]  bulkreg:upload:{<id>}:published  STRING bitmap: bit <row> set once Kafka acknowledged that row
-- ARGV[1]  retention in ms (the bitmap expires this long after its last change, as the upload's other keys)
-- ARGV[2 ..] row numbers acknowledged
--
-- A publisher that resumes an upload left part way publishes only the rows whose bit is not set. While the
-- state is "publishing", "state_at" moves to now: a producer still at work is not taken for dead (see
-- upload_state.lua's stale age).
--
-- The rows are recorded even when the meta hash is gone (Redis lost it): they were acknowledged all the
-- same, and the same file sent again must not queue them twice.
--
-- Reply: the number of rows recorded as published so far.
for i = 2, #ARGV do
  redis.call('SETBIT', KEYS[2], tonumber(ARGV[i]), 1)
end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[1]))
if redis.call('HGET', KEYS[1], 'state') == 'publishing' then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'state_at', string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
end
return redis.call('BITCOUNT', KEYS[2])
