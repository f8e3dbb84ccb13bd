-- circuit_allow.lua: may this caller call the registration API now? Used by
-- circuit.Breaker.Allow, once right before each call.
--
-- Closed: yes. Open: no, until the probe is due; the first caller after that
-- takes the probe (the circuit turns half-open) and holds it for a lease, so
-- exactly one call tests the API fleet-wide. Half-open: no, except for a caller
-- asking again with the probe's own id (a retried request whose answer was
-- lost), or when the holder's lease ran out (it crashed or hung): the asker
-- takes the probe over.
--
-- KEYS[1]  bulkreg:{circuit}:state  HASH: state ("closed" | "open" | "half-open"), opened_at,
--          next_probe, probe_until (µs, Redis clock), interval (µs), probe_id, probes, lapsed, opens
-- ARGV[1]  the caller's probe id (fresh per call)
-- ARGV[2]  probe lease in µs
-- ARGV[3]  poll interval in µs: while a probe is out, others ask again after at most this
-- ARGV[4]  retention of the state hash in ms
--
-- Reply: {state, allowed (0|1), probe (0|1), retry_at µs, now µs, opened_at µs (0 when closed)}
-- as strings and integers; retry_at is when a refused caller should ask again (now when allowed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function us(x) return string.format('%.0f', x) end
local h = redis.call('HMGET', KEYS[1], 'state', 'opened_at', 'next_probe', 'probe_until', 'probe_id')
local state = h[1] or 'closed'
if state == 'closed' then
  return {'closed', 1, 0, us(now), us(now), '0'}
end
local opened = tonumber(h[2] or '0')
local function grant(lapsed)
  local lease = now + tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], 'state', 'half-open', 'probe_id', ARGV[1], 'probe_until', us(lease))
  redis.call('HINCRBY', KEYS[1], 'probes', 1)
  if lapsed then redis.call('HINCRBY', KEYS[1], 'lapsed', 1) end
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
  return {'half-open', 1, 1, us(now), us(now), us(opened)}
end
if state == 'open' then
  local due = tonumber(h[3] or '0')
  if now >= due then
    return grant(false)
  end
  return {'open', 0, 0, us(due), us(now), us(opened)}
end
-- half-open
local until_ = tonumber(h[4] or '0')
if h[5] == ARGV[1] and now < until_ then
  return {'half-open', 1, 1, us(now), us(now), us(opened)}
end
if now >= until_ then
  return grant(true)
end
local retry = now + tonumber(ARGV[3])
if until_ < retry then retry = until_ end
return {'half-open', 0, 0, us(retry), us(now), us(opened)}
