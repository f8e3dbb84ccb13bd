-- slot_guard.lua: the marker of a Redis Cluster hash slot, which tells whether
-- Redis still holds what the throttle wrote there. throttle.New prepends this
-- file to reserve.lua, reserve_fixed.lua and reserve_token_bucket.lua: it
-- takes no KEYS[1] or ARGV[1] of its own and has no Reply; it defines
-- slot_guard(marker, now, hold, id) for them.
--
-- Every hash slot has one marker, bulkreg:{<tag>}:marker, a HASH whose tag is
-- chosen to hash to that slot (throttle.Markers), so a seller's scripts read
-- the marker of the seller's slot with no extra round trip, on Cluster too:
--   epoch   the epoch of every slot granted in this hash slot (check.lua compares it)
--   hold    µs: no slot of any seller in this hash slot starts before it
--   since   µs: when this state began (a loss was found, or Initialize ran)
--   cause   "init" (throttle.Initialize: a new Redis), "missing" (the marker was
--           gone: Redis lost the hash slot's data, or was never initialised),
--           "new-server" (the data was written by another redis-server process:
--           a restart from disk or a failover, either of which may miss the last writes)
--   server  run_id of the redis-server process that holds the state
-- Markers have no TTL: unlike a seller's log they outlive an idle minute, so
-- only a loss removes them.
--
-- slot_guard(marker, now, hold, id) returns epoch, hold_until, lost:
--   the marker as it is when it is present and was written by this process;
--   otherwise a new epoch and hold_until = now + hold, written down (lost = 1).
-- Calls made before the loss are then all more than a window before any slot
-- granted after it, whichever consumers made them and whether they still run.
local function slot_guard(marker, now, hold, id)
  local m = redis.call('HMGET', marker, 'epoch', 'hold', 'server')
  local info = redis.pcall('INFO', 'server')
  local server = ''
  if type(info) == 'string' then
    server = string.match(info, 'run_id:(%x+)') or ''
  end
  if m[1] and (m[3] or '') == server then
    return m[1], tonumber(m[2] or '0') or 0, 0
  end
  local cause = 'missing'
  if m[1] then cause = 'new-server' end
  local epoch = string.format('%d', now) .. '-' .. string.sub(id, 1, 8)
  local hold_until = now + hold
  local before = tonumber(m[2] or '0') or 0
  if before > hold_until then hold_until = before end
  redis.call('HSET', marker, 'epoch', epoch, 'hold', string.format('%d', hold_until), 'since', string.format('%d', now),
    'cause', cause, 'server', server)
  return epoch, hold_until, 1
end
