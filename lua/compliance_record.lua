-- compliance_record.lua: append one registration-API call to a seller's call
-- history and trim the history to its retention. Used by compliance.Recorder.
--
-- KEYS[1]  bulkreg:{s:<seller>}:calls   ZSET, score = call time in µs (Redis clock), member = "<status>|<class>|<key>|<call µs, or a nonce when ARGV[1] is 0>"
-- ARGV[1]  call time in µs since the Unix epoch on the Redis clock; "0" = now (redis TIME)
-- ARGV[2]  member (one per call: recording the same call again rewrites it)
-- ARGV[3]  retention in µs: calls older than now − retention are removed
-- ARGV[4…] optional: more calls, as pairs of call time and member like ARGV[1] and ARGV[2] (the
--          calls of a seller answered at once share one script: compliance.Recorder.RecordWith)
--
-- Reply: {score, new}: the score written for the first call, as a string of µs (exact: Lua numbers would lose
-- digits); new is 1 when the history did not exist before this call (the seller's first call in
-- the retention, or Redis lost the history), so the caller lists the seller again at once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function score(x)
  local at = tonumber(x)
  if at == nil or at <= 0 then at = now end
  return string.format('%d', at)
end
local retention = tonumber(ARGV[3])
local first = score(ARGV[1])
local new = 1 - redis.call('EXISTS', KEYS[1])
local add = {first, ARGV[2]}
for i = 4, #ARGV, 2 do
  add[#add + 1] = score(ARGV[i])
  add[#add + 1] = ARGV[i + 1]
end
redis.call('ZADD', KEYS[1], unpack(add))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now - retention))
-- the key outlives its newest call by the retention, so an idle seller's history expires whole
redis.call('PEXPIRE', KEYS[1], math.floor(retention / 1000) + 1000)
return {first, new}
