-- circuit_report.lua: record the outcome of one call to the registration API and
-- move the circuit. Used by circuit.Breaker.Report, once after each call.
--
-- While closed, every call is counted in a sliding window kept as a ring of
-- buckets; a transient failure then checks whether the circuit must open: at
-- least min_calls calls in the window, failures >= ratio × calls, failures from
-- at least min_rows distinct rows and from at least max(2, min_sellers) distinct
-- sellers, and the failures are spread: left out the seller that failed most,
-- the others still failed at least twice and at least ratio × their calls. One
-- poison row, or one seller's broken rows, can never open it, not even when
-- that seller is the only one calling (nothing tells its fault from the API's
-- then: its rows spend their own retry budget, and the fleet's circuit opens
-- as soon as a second seller's rows fail too).
-- It opens too when several sellers' last two calls or more failed, with the
-- rows and calls the rule above asks for, and no other seller was answered
-- since (below): answers from before the failures outweigh them otherwise.
-- Nor does it open while a seller is wholly healthy: a seller with enough answered
-- calls in the window (success or a refusal of the row: the API answers it), one of
-- them in the newer half and in a later bucket than the window's first failure
-- (answers from before the failures began prove nothing of the API since: an
-- outage that begins right after a seller's burst is an outage), and no
-- transient failure proves the API is up, so the
-- others' failures are their own (two sellers answered 503 for good beside a third
-- registering would otherwise hold the circuit open, and the two sellers' rows would
-- never spend their retry budget). "Enough" is the fewest calls that all succeed
-- with a chance of 5 % or less at the failure ratio (5 at 0.5, 2 at least): in an
-- outage, whole or partial (random failures), a seller that many calls without a
-- failure is unlikely.
-- The sellers failing while a seller was wholly healthy are remembered as sick
-- (state field "sick"), until one of their calls is answered: once the healthy
-- seller has nothing left to call, their failures alone do not open the circuit
-- either (the healthy seller's rows may be done in seconds while the others'
-- rows keep failing for minutes). It opens as soon as a seller not known sick
-- fails with them, as in an outage; that outage's end does not cure them (were
-- they forgotten on opening, the sick sellers would reopen it after the
-- recovery, and their rows would wait behind their own failing probes until
-- another seller called).
-- A probe answered for a seller other than those whose failures opened the
-- circuit (state field "opened_by") says the same of them: they are sick
-- (sellers that fail from the start, before a healthy one calls, open the
-- circuit before anyone is wholly healthy; the healthy seller's probe then
-- closes it, and their failures do not reopen it).
-- The probe's outcome decides a half-open circuit: an answer (success or a
-- refusal of the row) closes it and clears the window; a transient failure opens
-- it again with the probe interval multiplied (up to the maximum); an abandoned
-- probe (no answer, the caller gave up) hands the probe to the next caller at once.
-- A refusal of bulkreg itself ("refused": 401, 403, a 404 off the route, 405, 3xx)
-- says every call would get the same answer: it opens a closed circuit at once,
-- whatever the window's counts, and marks it reason=misconfigured, held like an
-- outage until a probe gets an answer; a refused probe counts as a failed one.
-- Except when it is one seller's: another seller's call was answered in the
-- window, or the seller is known sick, and no other seller was refused in the
-- window (the API refuses this seller, say a 403 for an app it revoked): then
-- the circuit stays closed and the reply says so, the caller treats it as that
-- seller's failure, and the seller is sick, as one failing beside a healthy
-- seller is: once the others have nothing left to call, its refusals alone are
-- still its own (counted as the fleet's, they would open its circuit, hold it
-- misconfigured and page the operator). The probe that closes
-- the circuit is counted in the fresh window as an answer, so one seller's
-- refusals cannot reopen it at once, over and over; a batch sent with it
-- (ARGV[15]) is not: its answers came before the fresh window.
-- The reason ("unavailable" or "misconfigured") is kept while the circuit is not
-- closed; a refusal seen while open marks it misconfigured.
-- Each seller's failing streak (KEYS[3]) follows its calls for the sellers' pages
-- (circuit_seller.lua): a transient failure reported while the circuit is closed
-- adds one to its seller's streak, and an answered call of the seller ends it, so
-- the page's "failing" notice leaves with the first call the API takes. Streaks are
-- kept past the window (a seller at its limit calls in bursts a limit window apart)
-- and dropped when the circuit opens or closes: an outage's failures are the
-- outage's. They decide nothing here.
--
-- Each bucket keeps its distinct sellers and rows capped at the thresholds, so a
-- bucket costs O(threshold) whatever the traffic; the capped union of the buckets
-- still reaches a threshold exactly when the true union does.
--
-- KEYS[1]  bulkreg:{circuit}:state   HASH (see circuit_allow.lua); also closed_at, last_open_us,
--          reason ("unavailable" | "misconfigured", while not closed), refusals (count)
-- KEYS[2]  bulkreg:{circuit}:window  HASH: "width" (a bucket's width in µs) and "nb" (buckets), the
--          ring's shape for readers without the consumers' settings; for bucket slot i, "i:id" (bucket number), "i:n" (calls),
--          "i:f" (transient failures), "i:rs" (sellers refused, at most 2), "i:fs" (sellers that
--          failed), "i:fr" (rows that failed); the lists are "\n"-separated; "i:fc" (transient
--          failures per seller, "seller\tcount" lines, for at most spread_cap sellers a bucket);
--          "i:ok" (answered calls per seller, the same lines and cap: also who was answered)
-- KEYS[3]  bulkreg:{circuit}:failing HASH: per seller whose last reported call failed, "n first_us
--          last_us" (failures in a row since its last answered call, the first and the last); at
--          most failing_cap sellers; kept for the retention after its last change
-- ARGV[1]  outcome: "success" | "failure" | "answered" | "abandoned" | "refused"
-- ARGV[2]  probe id ("" when the call was not a probe)
-- ARGV[3]  seller id
-- ARGV[4]  row key (the Idempotency-Key)
-- ARGV[5]  window in µs
-- ARGV[6]  number of buckets
-- ARGV[7]  min calls
-- ARGV[8]  failure ratio (0 < r <= 1)
-- ARGV[9]  min distinct failed rows
-- ARGV[10] min distinct failed sellers
-- ARGV[11] first probe interval in µs
-- ARGV[12] longest probe interval in µs
-- ARGV[13] probe interval multiplier
-- ARGV[14] retention of the state hash in ms
-- ARGV[15] optional: answered calls of the caller's process not reported one by one (circuit.Breaker
--          counts them while it knows the circuit is closed and sends them with its next report)
-- ARGV[16] optional: their distinct sellers, "\n"-separated, at most min distinct failed sellers
-- ARGV[17] optional: the Redis time, in µs, of the batch's newest answer (the caller's view of
--          the Redis clock; later than now counts as now). The batch is counted in the bucket of
--          that time, not in the one it reaches Redis in, and dropped when that bucket left the
--          window or a probe's answer cleared the window; it ends a seller's failing streak, and
--          cures a sick seller, only when it is newer than the seller's last failure. A batch
--          sent with a failure long after its answers would otherwise say the API answered after
--          the failures began (the healthy-seller rule, "none answered since" below, and
--          circuit_seller.lua's answers since a seller's streak began)
--
-- Reply: {state, changed (0|1), retry_at µs, now µs, opened_at µs (0 when closed), reason ("" when
-- closed), own (0|1)}, the state after this report; changed is 1 when this report opened or closed
-- the circuit; own is 1 when a failed probe was judged its seller's own (the seller is known sick).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function us(x) return string.format('%.0f', x) end
local outcome, probe, seller, row = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local window, buckets = tonumber(ARGV[5]), tonumber(ARGV[6])
local minCalls, ratio = tonumber(ARGV[7]), tonumber(ARGV[8])
local minRows, minSellers = tonumber(ARGV[9]), tonumber(ARGV[10])
-- One seller is never "the API": whatever the setting, two sellers must fail.
if minSellers < 2 then minSellers = 2 end
-- Per-seller failure counts are kept for this many sellers a bucket: enough
-- to find the seller that failed most; a bucket with more failing sellers
-- than that is an outage whichever seller is left out.
local spreadCap = 16
-- Failing streaks are kept for this many sellers at once: sellers failing alone
-- while the circuit stays closed are few; more than this is an outage, which the
-- circuit's opening ends.
local failingCap = 256
local retention = tonumber(ARGV[14])
local unsent = tonumber(ARGV[15] or '0') or 0
local unsentAt = tonumber(ARGV[17] or '') or now
if unsentAt > now then unsentAt = now end
local h = redis.call('HMGET', KEYS[1], 'state', 'opened_at', 'next_probe', 'probe_id', 'interval', 'reason', 'sick', 'opened_by')
local state = h[1] or 'closed'
local opened = tonumber(h[2] or '0')
local reason = h[6] or 'unavailable'

-- own: the failure reported was the seller's own, not the API's (set
-- before a reply that says so)
local own = 0
local function reply(st, changed, retry, op)
  local r = reason
  if st == 'closed' then r = '' end
  return {st, changed, us(retry), us(now), us(op), r, own}
end

-- the window: a ring of buckets
local width = math.floor(window / buckets)
if width < 1 then width = 1 end
local cur = math.floor(now / width)
-- field name of bucket id's slot in the ring
local function fb(id, name) return tostring(id % buckets) .. ':' .. name end
local function f(name) return fb(cur, name) end
-- start bucket id afresh when its slot holds another. false: id is older
-- than the current bucket and its slot holds a newer one (only when Redis's
-- clock stepped back), which an older bucket's calls must not wipe out.
local function bucket(id)
  local held = tonumber(redis.call('HGET', KEYS[2], fb(id, 'id')) or '-1')
  if held > id and id < cur then return false end
  if held ~= id then
    -- width and nb describe the ring to its readers (circuit_seller.lua),
    -- which do not share the consumers' settings (the producer's pages)
    redis.call('HSET', KEYS[2], fb(id, 'id'), us(id), fb(id, 'n'), 0, fb(id, 'f'), 0, fb(id, 'rs'), '',
      fb(id, 'fs'), '', fb(id, 'fr'), '', fb(id, 'fc'), '', fb(id, 'ok'), '', 'width', us(width), 'nb', buckets)
  end
  redis.call('PEXPIRE', KEYS[2], math.ceil(2 * window / 1000) + 1000)
  return true
end
-- add member to the list in field unless it is there or the list holds cap members
local function capadd(field, member, cap)
  local v = redis.call('HGET', KEYS[2], field) or ''
  local n = 0
  for m in string.gmatch(v, '[^\n]+') do
    if m == member then return end
    n = n + 1
  end
  if n >= cap then return end
  if v == '' then v = member else v = v .. '\n' .. member end
  redis.call('HSET', KEYS[2], field, v)
end
-- count by (default 1) of member in field's "member\tcount" lines, unless the
-- lines hold cap members already (its count is then left out)
local function capcount(field, member, cap, by)
  local v = redis.call('HGET', KEYS[2], field) or ''
  local out, n, found = {}, 0, false
  for m, c in string.gmatch(v, '([^\t\n]+)\t(%d+)') do
    n = n + 1
    if m == member then c = tostring(tonumber(c) + (by or 1)); found = true end
    out[n] = m .. '\t' .. c
  end
  if not found then
    if n >= cap then return end
    out[n + 1] = member .. '\t' .. tostring(by or 1)
  end
  redis.call('HSET', KEYS[2], field, table.concat(out, '\n'))
end
-- the sellers known sick (see the header), as a set
local sick, nsick = {}, 0
for x in string.gmatch(h[7] or '', '[^\n]+') do sick[x] = true; nsick = nsick + 1 end
-- the sellers of list (an array) are sick too
local function addSick(list)
  local added = false
  for _, y in ipairs(list) do
    if not sick[y] and nsick < spreadCap then sick[y] = true; nsick = nsick + 1; added = true end
  end
  if not added then return end
  local out = {}
  for y in pairs(sick) do out[#out + 1] = y end
  redis.call('HSET', KEYS[1], 'sick', table.concat(out, '\n'))
end
-- an answered call of a sick seller: it is not sick any more
local function cured(x)
  if not sick[x] then return end
  sick[x] = nil
  nsick = nsick - 1
  local out = {}
  for y in pairs(sick) do out[#out + 1] = y end
  if #out == 0 then redis.call('HDEL', KEYS[1], 'sick') else redis.call('HSET', KEYS[1], 'sick', table.concat(out, '\n')) end
end
-- count this call (one: 1, or 0 for an abandoned one) in the current bucket,
-- with its answer when it was answered, and the unsent batch (its calls, all
-- answered) in the bucket of its newest answer, unless that left the window
-- or batched is false
local function count(one, answered, batched)
  bucket(cur)
  redis.call('HINCRBY', KEYS[2], f('n'), one)
  if answered then
    capcount(f('ok'), seller, spreadCap)
    cured(seller)
    redis.call('HDEL', KEYS[3], seller)
  end
  if not batched or unsent == 0 then return end
  local at = math.floor(unsentAt / width)
  if cur - at >= buckets or not bucket(at) then return end
  redis.call('HINCRBY', KEYS[2], fb(at, 'n'), unsent)
  -- The batch's calls per seller are not sent: a batch of one seller (its
  -- list holds up to minSellers) is all that seller's, else each seller
  -- named answered at least once.
  local names = {}
  for s in string.gmatch(ARGV[16] or '', '[^\n]+') do names[#names + 1] = s end
  for _, s in ipairs(names) do
    if #names == 1 then capcount(fb(at, 'ok'), s, spreadCap, unsent) else capcount(fb(at, 'ok'), s, spreadCap) end
    -- answers older than the seller's last failure end nothing
    local last = tonumber(string.match(redis.call('HGET', KEYS[3], s) or '', '^%d+ %d+ (%d+)') or '-1')
    if unsentAt > last then
      cured(s)
      redis.call('HDEL', KEYS[3], s)
    end
  end
end
-- the window's live buckets as {field suffix -> value} tables
local function live()
  local all = redis.call('HGETALL', KEYS[2])
  local m = {}
  for i = 1, #all, 2 do m[all[i]] = all[i + 1] end
  local out = {}
  for i = 0, buckets - 1 do
    local id = tonumber(m[i .. ':id'] or '-1')
    if id >= 0 and id <= cur and cur - id < buckets then
      out[#out + 1] = function(name) return m[i .. ':' .. name] end
    end
  end
  return out
end
local function union(set, v, n)
  for x in string.gmatch(v or '', '[^\n]+') do
    if not set[x] then set[x] = true; n = n + 1 end
  end
  return n
end
-- the window's counts, summed over its live buckets, in one read
local function tally()
  local w = {calls = 0, fails = 0, failSellers = {}, nfs = 0, failRows = {}, nfr = 0, refused = {}, nrs = 0,
    perSeller = {}, fcFull = false, okCalls = {}, okRecent = {}, okNewest = {}, failSince = nil}
  for _, b in ipairs(live()) do
    local id = tonumber(b('id'))
    w.calls = w.calls + tonumber(b('n') or '0')
    w.fails = w.fails + tonumber(b('f') or '0')
    w.nfs = union(w.failSellers, b('fs'), w.nfs)
    w.nfr = union(w.failRows, b('fr'), w.nfr)
    w.nrs = union(w.refused, b('rs'), w.nrs)
    local nfc = 0
    for x, c in string.gmatch(b('fc') or '', '([^\t\n]+)\t(%d+)') do
      w.perSeller[x] = (w.perSeller[x] or 0) + tonumber(c)
      nfc = nfc + 1
      if not w.failSince or id < w.failSince then w.failSince = id end
    end
    -- a full list may have left a failing seller out: nobody is known healthy
    if nfc >= spreadCap then w.fcFull = true end
    local recent = 2 * (cur - id) < buckets
    for x, c in string.gmatch(b('ok') or '', '([^\t\n]+)\t(%d+)') do
      w.okCalls[x] = (w.okCalls[x] or 0) + tonumber(c)
      if recent then w.okRecent[x] = true end
      if not w.okNewest[x] or id > w.okNewest[x] then w.okNewest[x] = id end
    end
  end
  return w
end
-- a seller wholly healthy in the window (see the header): the API is up.
-- Its answers prove it only from their time on: one of them must come in a
-- later bucket than the window's first failure, or they all may predate an
-- outage that began after them.
local function healthy(w)
  local need = 2
  if ratio < 1 then need = math.max(2, math.ceil(math.log(0.05) / math.log(1 - ratio) - 1e-9)) end
  for x, c in pairs(w.okCalls) do
    if c >= need and w.okRecent[x] and not w.perSeller[x] and (not w.failSince or w.okNewest[x] > w.failSince) then return true end
  end
  return false
end
-- a seller failing in the window that is not known sick
local function freshFailure(w)
  for y in pairs(w.perSeller) do
    if not sick[y] then return true end
  end
  return false
end
local function open(why)
  local first = tonumber(ARGV[11])
  reason = why
  redis.call('HSET', KEYS[1], 'state', 'open', 'opened_at', us(now), 'interval', us(first), 'next_probe', us(now + first), 'reason', why)
  redis.call('HDEL', KEYS[1], 'probe_until', 'probe_id', 'opened_by')
  redis.call('HINCRBY', KEYS[1], 'opens', 1)
  redis.call('PEXPIRE', KEYS[1], retention)
  redis.call('DEL', KEYS[2], KEYS[3])
  return reply('open', 1, now + first, now)
end

if outcome == 'refused' then
  redis.call('HINCRBY', KEYS[1], 'refusals', 1)
  if state == 'closed' then
    count(1, false, true)
    capadd(f('rs'), seller, 2)
    local w = tally()
    -- known sick: seen failing while the API answered another seller
    local others = sick[seller] or false
    for x in pairs(w.okCalls) do
      if x ~= seller then others = true end
    end
    if others and w.nrs < 2 then
      -- the API answers another seller and refuses this one alone: its own
      addSick({seller})
      redis.call('PEXPIRE', KEYS[1], retention)
      return reply('closed', 0, now, 0)
    end
    -- every call would be refused the same way: no counts to wait for
    return open('misconfigured')
  end
  reason = 'misconfigured'
  redis.call('HSET', KEYS[1], 'reason', reason)
  redis.call('PEXPIRE', KEYS[1], retention)
  -- a refused probe is a failed one
  outcome = 'failure'
end

if state ~= 'closed' then
  if probe == '' then
    -- a call that started before the circuit opened: the probe decides
    return reply(state, 0, tonumber(h[3] or now), opened)
  end
  if outcome == 'success' or outcome == 'answered' then
    -- the API answers: close, forget the failures that opened it, and count
    -- the probe's answer in the fresh window
    redis.call('HSET', KEYS[1], 'state', 'closed', 'closed_at', us(now), 'last_open_us', us(now - opened))
    redis.call('HDEL', KEYS[1], 'opened_at', 'next_probe', 'probe_until', 'probe_id', 'interval', 'reason', 'opened_by')
    if h[6] ~= 'misconfigured' then
      local by, among = {}, false
      for x in string.gmatch(h[8] or '', '[^\n]+') do
        if x == seller then among = true else by[#by + 1] = x end
      end
      -- answered for a seller that was not failing: the others' failures were theirs
      if not among and #by > 0 then addSick(by) end
    end
    redis.call('PEXPIRE', KEYS[1], retention)
    redis.call('DEL', KEYS[2], KEYS[3])
    -- a batch of answers from before the fresh window is not its news
    count(1, true, false)
    return reply('closed', 1, now, 0)
  end
  if state == 'half-open' and h[4] == probe then
    -- The probe of a seller known sick failed: its own failure, as when the
    -- circuit is closed, and no news of the API, so it passes the probe on
    -- as an abandoned one does, and the reply says it was the seller's own
    -- (its row spends its retry budget). Counted as the API's, such a probe
    -- would hold the circuit open for as long as that seller's rows won the
    -- probe (dozens of probes in a row by one row, which never spends an
    -- attempt, while healthy sellers' rows wait).
    if outcome == 'failure' and ARGV[1] == 'failure' and sick[seller] then
      own = 1
    elseif outcome == 'failure' then
      local interval = tonumber(h[5] or ARGV[11]) * tonumber(ARGV[13])
      if interval > tonumber(ARGV[12]) then interval = tonumber(ARGV[12]) end
      redis.call('HSET', KEYS[1], 'state', 'open', 'interval', us(interval), 'next_probe', us(now + interval))
      redis.call('HDEL', KEYS[1], 'probe_until', 'probe_id')
      redis.call('PEXPIRE', KEYS[1], retention)
      return reply('open', 0, now + interval, opened)
    end
    -- abandoned, or a sick seller's own: the next caller probes at once,
    -- the interval kept
    redis.call('HSET', KEYS[1], 'state', 'open', 'next_probe', us(now))
    redis.call('HDEL', KEYS[1], 'probe_until', 'probe_id')
    redis.call('PEXPIRE', KEYS[1], retention)
    return reply('open', 0, now, opened)
  end
  -- a lapsed probe's late failure or give-back: its successor decides
  return reply(state, 0, tonumber(h[3] or now), opened)
end

local one = 1
if outcome == 'abandoned' then one = 0 end
if one + unsent == 0 then
  return reply('closed', 0, now, 0)
end

-- closed: count the call in its bucket
count(one, outcome == 'success' or outcome == 'answered', true)
if outcome ~= 'failure' then
  return reply('closed', 0, now, 0)
end
redis.call('HINCRBY', KEYS[2], f('f'), 1)
capadd(f('fs'), seller, minSellers)
capadd(f('fr'), row, minRows)
capcount(f('fc'), seller, spreadCap)
-- the seller's failing streak, one longer
local streak = redis.call('HGET', KEYS[3], seller)
if streak or redis.call('HLEN', KEYS[3]) < failingCap then
  local n, first = 0, now
  if streak then
    local a, b = string.match(streak, '^(%d+) (%d+)')
    n, first = tonumber(a or '0'), tonumber(b or us(now))
  end
  redis.call('HSET', KEYS[3], seller, (n + 1) .. ' ' .. us(first) .. ' ' .. us(now))
  redis.call('PEXPIRE', KEYS[3], retention)
end

-- a failure: does the window now say the API is down?
local w = tally()
if not w.fcFull then
  if healthy(w) then
    -- the failures are their sellers' own: remember them as sick
    local failing = {}
    for y in pairs(w.perSeller) do failing[#failing + 1] = y end
    addSick(failing)
    redis.call('PEXPIRE', KEYS[1], retention)
    return reply('closed', 0, now, 0)
  end
  -- only sellers known sick fail: their own failures, as when they were seen
  if not freshFailure(w) then return reply('closed', 0, now, 0) end
end
-- Several sellers fail together and none is answered since: the API is down,
-- whatever answers from before fill the window (a runner holds a seller after
-- its first failures, so an outage that begins between a fleet's bursts leaves
-- few failures to outweigh them). A seller fails when its last two calls or
-- more failed, the last within the window; "since" is two buckets or more
-- after the newest such streak began (a call sent before it and answered
-- just after lands in the next bucket).
do
  local all = redis.call('HGETALL', KEYS[3])
  local failing, nfailing, since = {}, 0, nil
  for i = 1, #all, 2 do
    local n, first, last = string.match(all[i + 1], '^(%d+) (%d+) (%d+)')
    n, first, last = tonumber(n or '0'), tonumber(first or '0'), tonumber(last or '0')
    if n >= 2 and now - last < window then
      failing[all[i]] = true
      nfailing = nfailing + 1
      local b = math.floor(first / width)
      if not since or b > since then since = b end
    end
  end
  if nfailing >= minSellers and w.nfr >= minRows and w.calls >= minCalls then
    local answered = false
    for x, id in pairs(w.okNewest) do
      if not failing[x] and id >= since + 2 then answered = true end
    end
    if not answered then
      local by = {}
      for y in pairs(failing) do by[#by + 1] = y end
      local r = open('unavailable')
      redis.call('HSET', KEYS[1], 'opened_by', table.concat(by, '\n'))
      return r
    end
  end
end
-- The seller that failed most, left out: do the others' calls say the API is down?
-- Its calls are not counted per seller; its failures stand for them, which
-- only makes the others' share look smaller.
local worst = 0
for _, c in pairs(w.perSeller) do
  if c > worst then worst = c end
end
local otherFails, otherCalls = w.fails - worst, w.calls - worst
local spread = otherFails >= 2 and otherFails >= ratio * otherCalls
if w.calls >= minCalls and w.fails >= ratio * w.calls and w.nfr >= minRows and w.nfs >= minSellers and spread then
  local by = {}
  for y in pairs(w.perSeller) do by[#by + 1] = y end
  local r = open('unavailable')
  if #by > 0 then redis.call('HSET', KEYS[1], 'opened_by', table.concat(by, '\n')) end
  return r
end
return reply('closed', 0, now, 0)
