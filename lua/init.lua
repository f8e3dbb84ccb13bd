#!lua flags=allow-cross-slot-keys
-- init.lua: create the throttle's hash-slot markers on a new Redis (see
-- slot_guard.lua), with no hold. Used by throttle.Initialize, once per Redis
-- (per master on Cluster, with the markers of the slots that master serves:
-- the flag above lets one script touch them all on that node).
--
-- A marker that is missing on a Redis in use means that Redis lost the data
-- of its hash slot; the reserve scripts then hold the slot one window. A new
-- Redis looks the same, so it is initialised: its markers say that nothing
-- was lost. Existing markers are never changed.
--
-- KEYS[1]     none: the markers are in different hash slots, which Redis
--             Cluster refuses among a command's keys; they come as ARGV, and
--             the flag above lets the script touch them on this node
-- ARGV[1]     "count": write nothing; "create": create the missing markers
-- ARGV[2..]   bulkreg:{<tag>}:marker, HASH, one per hash slot this node serves
--
-- Reply: {present, created}: markers found, markers created.
local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local info = redis.pcall('INFO', 'server')
local server = ''
if type(info) == 'string' then
  server = string.match(info, 'run_id:(%x+)') or ''
end
-- The node and replication ids, so a marker that moves with its hash slot
-- (a reshard) before any reservation in it is told from a loss (slot_guard.lua).
local node, replid = '', ''
local myid = redis.pcall('CLUSTER', 'MYID')
if type(myid) == 'string' then node = myid end
local repl = redis.pcall('INFO', 'replication')
if type(repl) == 'string' then replid = string.match(repl, 'master_replid:(%x+)') or '' end
local present, created = 0, 0
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[i]) == 1 then
    present = present + 1
  elseif ARGV[1] == 'create' then
    redis.call('HSET', ARGV[i], 'epoch', now .. '-init', 'hold', '0', 'since', now, 'cause', 'init', 'server', server,
      'node', node, 'replid', replid)
    created = created + 1
  end
end
return {present, created}
