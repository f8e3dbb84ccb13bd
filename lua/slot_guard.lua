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
--   node    the Redis Cluster node id (CLUSTER MYID) of that process; "" on a
--           single Redis. Written by Initialize (init.lua), or by the first
--           reservation that finds it absent (a marker of an older version).
--   replid  that process's replication id (INFO replication, master_replid)
--   moved   µs: when the marker was last found on another node of the same
--           Cluster, moved there whole with its hash slot (absent: never)
-- Markers have no TTL: unlike a seller's log they outlive an idle minute, so
-- only a loss removes them.
--
-- slot_guard(marker, now, hold, id) returns epoch, hold_until, lost:
--   the marker as it is when it is present and was written by this process,
--   or when it moved here with its hash slot (below); otherwise a new epoch
--   and hold_until = now + hold, written down (lost = 1).
-- Calls made before the loss are then all more than a window before any slot
-- granted after it, whichever consumers made them and whether they still run.
--
-- A slot migration (CLUSTER SETSLOT … MIGRATING/IMPORTING, MIGRATE, SETSLOT
-- NODE) moves each key whole, the marker and the sellers' logs alike, and the
-- old node stops serving the slot once its keys are gone: the new node holds
-- every write the old one held, so nothing is lost. The marker then names
-- another process, as after a failover or a restart from disk, which may
-- miss the last writes. What tells them apart, on this node, with no round trip:
--   - a restart from disk keeps the node id (nodes.conf): same node, another
--     process: a loss;
--   - a failover promotes a replica of the writer and hands it all of the
--     writer's slots: in this node's view of the Cluster the writer then
--     serves no slot, and is a replica, or flagged failing, or gone; and
--     this node's replication ids (master_replid, or master_replid2, the one
--     it followed before its promotion) may include the writer's: a loss;
--   - a migration comes from a master of the same Cluster that this node
--     sees up and connected and still serving slots (CLUSTER NODES), that is
--     another node, and whose replication id is none of this node's: not a
--     loss. The marker is taken over (server, node, replid) and keeps its
--     epoch and hold.
-- Anything else (a marker without the node id, a single Redis, an unknown
-- writer, a master emptied of its last slots before the first reservation
-- in one of them here) is a loss, the safe side. This costs nothing on the common path:
-- CLUSTER MYID, CLUSTER NODES and INFO replication run only when the marker
-- names another process, or lacks its node id.
-- Not seen: the old node restarted from disk after its last reservation in
-- the hash slot and before the slot moved, with no reservation in between;
-- that node's own reservations in its other slots find its restart.
local function guard_field(info, name)
  return string.match(info, name .. ':(%x+)') or ''
end

local function guard_me()
  local me = {node = '', replid = '', replid2 = ''}
  local id = redis.pcall('CLUSTER', 'MYID')
  if type(id) == 'string' then me.node = id end
  local info = redis.pcall('INFO', 'replication')
  if type(info) == 'string' then
    me.replid = guard_field(info, 'master_replid')
    me.replid2 = guard_field(info, 'master_replid2')
  end
  return me
end

-- guard_moved: the marker, written by node writer with replication id
-- replid, came to this node (me) by a slot migration, whole: the writer is
-- another master of this Cluster that this node sees up, connected and
-- serving slots, and this node never followed its replication stream.
local function guard_moved(me, writer, replid)
  if me.node == '' or writer == '' or writer == me.node then return false end
  if replid ~= '' and (replid == me.replid or replid == me.replid2) then return false end
  local nodes = redis.pcall('CLUSTER', 'NODES')
  if type(nodes) ~= 'string' then return false end
  for line in string.gmatch(nodes, '[^\n]+') do
    local f = {}
    for w in string.gmatch(line, '%S+') do f[#f + 1] = w end
    if f[1] == writer then
      local flags = ',' .. (f[3] or '') .. ','
      return string.find(flags, ',master,', 1, true) ~= nil
        and string.find(flags, 'fail', 1, true) == nil
        and string.find(flags, 'handshake', 1, true) == nil
        and string.find(flags, 'noaddr', 1, true) == nil
        and f[8] == 'connected' and #f > 8
    end
  end
  return false
end

local function slot_guard(marker, now, hold, id)
  local m = redis.call('HMGET', marker, 'epoch', 'hold', 'server', 'node', 'replid')
  local info = redis.pcall('INFO', 'server')
  local server = ''
  if type(info) == 'string' then
    server = string.match(info, 'run_id:(%x+)') or ''
  end
  if m[1] and (m[3] or '') == server then
    if not m[4] then
      -- A marker written before it named its node: name it now, once, so a
      -- migration of its hash slot can be told from a loss.
      local me = guard_me()
      redis.call('HSET', marker, 'node', me.node, 'replid', me.replid)
    end
    return m[1], tonumber(m[2] or '0') or 0, 0
  end
  local me = guard_me()
  if m[1] and guard_moved(me, m[4] or '', m[5] or '') then
    redis.call('HSET', marker, 'server', server, 'node', me.node, 'replid', me.replid, 'moved', string.format('%d', now))
    return m[1], tonumber(m[2] or '0') or 0, 0
  end
  local cause = 'missing'
  if m[1] then cause = 'new-server' end
  local epoch = string.format('%d', now) .. '-' .. string.sub(id, 1, 8)
  local hold_until = now + hold
  local before = tonumber(m[2] or '0') or 0
  if before > hold_until then hold_until = before end
  redis.call('HSET', marker, 'epoch', epoch, 'hold', string.format('%d', hold_until), 'since', string.format('%d', now),
    'cause', cause, 'server', server, 'node', me.node, 'replid', me.replid)
  return epoch, hold_until, 1
end
