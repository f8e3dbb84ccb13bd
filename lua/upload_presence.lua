-- upload_presence.lua: what Redis holds of the upload a row names, and what it may have lost of the
-- upload's hash slot. Used by uploadstatus.Store.Presence (a consumer asks once per upload it meets,
-- before the upload's first row claims or calls).
--
-- KEYS[1]  bulkreg:upload:{<id>}:meta   HASH: the upload's fields ("id" and "seller_id" once the producer
--          created it; only counts and "lost_at" when rows were recorded after Redis lost it)
-- KEYS[2]  bulkreg:{<tag>}:marker       HASH: the throttle's marker of the same hash slot (lua/slot_guard.lua:
--          "since", µs on the Redis clock, when what the slot holds became whole; "server", the run_id of
--          the redis-server process that wrote it)
-- ARGV[1]  none
--
-- Reply: {found, seller, since, marker server, server, now}: found 1 when the meta holds "id" or "lost_at"
-- (the upload was created, or rows of it were recorded after a loss), else 0; seller the meta's
-- "seller_id" ("" if none); since and marker server the marker's fields ("" without a marker); server the
-- run_id of this redis-server process; now the Redis clock in ms. Nothing is written.
local m = redis.call('HMGET', KEYS[1], 'id', 'lost_at', 'seller_id')
local found = 0
if m[1] or m[2] then
  found = 1
end
local mk = redis.call('HMGET', KEYS[2], 'since', 'server')
local info = redis.pcall('INFO', 'server')
local server = ''
if type(info) == 'string' then
  server = string.match(info, 'run_id:(%x+)') or ''
end
local t = redis.call('TIME')
return {found, m[3] or '', mk[1] or '', mk[2] or '', server,
  string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))}
