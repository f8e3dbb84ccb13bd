-- release.lua: give back a slot its caller will not use (shutdown, cancelled,
-- a call the API did not count), so the next caller can take it.
-- Used by throttle.Throttle.Release, for every policy.
--
-- A sliding or fixed log is only the entries it holds: removing a call's
-- (a fixed window's places in later windows too) frees its place, and the
-- next reservation may take it (fits.lua, reserve_fixed.lua).
-- A token bucket's next slot comes from tat, not from the log. Moving tat back
-- one interval, whatever slot was returned, would free the place of the slot
-- booked last: returning an earlier one would put the next reservation on
-- the last slot still booked (two calls on one token, a 429). So tat becomes
-- the smaller of itself and the bucket replayed (GCRA, in time order) over
-- the slots still held, from now: a slot begun counts as made now, and a
-- slot older than W' left tat before now (the throttle's interval +
-- tolerance is at most W').
-- Both are never before the bucket the API keeps, so no returned slot books
-- a token twice; a returned slot that was not the last frees a place only if
-- the slots after it leave one.
--
-- KEYS[1]  the policy's log: bulkreg:{s:<seller>}:log (sliding), :fixed or :tb (token bucket); ZSET as in reserve*.lua
-- KEYS[2]  token bucket only: bulkreg:{s:<seller>}:tb:tat, STRING, "tat base" as in reserve_token_bucket.lua
-- ARGV[1]  reservation id
-- ARGV[2]  token bucket only: the emission interval in µs (reserve_token_bucket.lua)
-- ARGV[3]  token bucket only: W' = window + margin, in µs (absent: tat is left as it is)
--
-- Reply: 1 when the id held a slot and it was removed, 0 when it held none.
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
-- a fixed window's places in the later windows its call might have been counted in (reserve_fixed.lua)
if removed == 1 then
  local i = 1
  while redis.call('ZREM', KEYS[1], ARGV[1] .. ':' .. i) == 1 do i = i + 1 end
end
if removed == 1 and KEYS[2] and ARGV[3] then
  local interval, win = tonumber(ARGV[2]), tonumber(ARGV[3])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local replay = now
  local held = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('%.0f', now - win), '+inf', 'WITHSCORES')
  for i = 2, #held, 2 do
    replay = math.max(replay, tonumber(held[i])) + interval
  end
  local state = redis.call('GET', KEYS[2])
  if state then
    local a, b = string.match(state, '^(%S+)%s*(%S*)$')
    if replay < (tonumber(a) or 0) then
      redis.call('SET', KEYS[2], string.format('%.3f %s', replay, b ~= '' and b or '0'), 'KEEPTTL')
    end
  end
end
return removed
