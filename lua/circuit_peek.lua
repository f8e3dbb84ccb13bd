-- circuit_peek.lua: the circuit's state, read without changing it. Used by
-- circuit.Breaker.Peek (metrics, and consumers deciding whether to read more rows).
--
-- KEYS[1]  bulkreg:{circuit}:state  HASH (see circuit_allow.lua)
-- ARGV[1]  poll interval in µs: while a probe is out, ask again after at most this
--
-- Reply: {state, retry_at µs, now µs, opened_at µs (0 when closed), probes, opens, lapsed,
-- reason ("" when closed, else "unavailable" or "misconfigured": circuit_report.lua)}.
-- retry_at is when a call may next be allowed: now when closed or when a probe is
-- due (open past next_probe, or a lapsed lease), later otherwise.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function us(x) return string.format('%.0f', x) end
local h = redis.call('HMGET', KEYS[1], 'state', 'opened_at', 'next_probe', 'probe_until', 'probes', 'opens', 'lapsed', 'reason')
local state = h[1] or 'closed'
local probes, opens, lapsed = tonumber(h[5] or '0'), tonumber(h[6] or '0'), tonumber(h[7] or '0')
if state == 'closed' then
  return {'closed', us(now), us(now), '0', probes, opens, lapsed, ''}
end
local opened = tonumber(h[2] or '0')
local retry = now
if state == 'open' then
  local due = tonumber(h[3] or '0')
  if due > now then retry = due end
else
  local until_ = tonumber(h[4] or '0')
  if until_ > now then
    retry = now + tonumber(ARGV[1])
    if until_ < retry then retry = until_ end
  end
end
return {state, us(retry), us(now), us(opened), probes, opens, lapsed, h[8] or 'unavailable'}
