-- upload_share_charge.lua: charge an upload to its seller's share of Redis, or refuse it. Used by
-- uploadstatus.Store.Create before it writes anything of the upload (the upload's keys are in another
-- hash slot, {<upload_id>}; this script touches only the seller's).
--
-- KEYS[1]  bulkreg:{s:<seller>}:usage  HASH: upload id → "<bytes> <expires>": what the upload's keys hold
--          (as Store.Create counts it) and when they expire (ms, Redis clock, as far as this record knows:
--          a consumer's late row moves the upload's expiry later, see Store.Charge)
-- ARGV[1]  upload id
-- ARGV[2]  bytes the upload keeps
-- ARGV[3]  how long its keys are kept, in ms
-- ARGV[4]  most bytes the seller's uploads may keep (0 = no bound)
-- ARGV[5]  most uploads the seller may keep (0 = no bound)
-- ARGV[6]  the longest an upload is kept, in ms (the store's retention): the record itself is kept this long
--          after its latest entry's expiry, since a consumer's late row can keep an upload past the expiry
--          its entry knows
--
-- The upload's own entry (the same file sent again) is replaced, not counted twice. An entry whose
-- expiry has passed still counts here: the caller asks Redis whether that upload is gone and settles it
-- (upload_share_settle.lua) before it takes a refusal as final.
--
-- Reply: {1, uploads, bytes, 0, due ids ...} when charged (the seller's usage with this upload);
-- {0, uploads, bytes, wait, due ids ...} when refused: the seller's usage without this upload; wait, in
-- ms, until enough of the seller's entries expire for this upload to fit (-1: it never fits, it is larger
-- than the whole share). Due ids are the entries whose expiry has passed, for the caller to settle.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, need, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local maxb, maxn, linger = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local all = redis.call('HGETALL', KEYS[1])
local entries, due = {}, {}
local n, used, last = 0, 0, now + keep
for i = 1, #all, 2 do
  if all[i] ~= id then
    local b, e = string.match(all[i + 1], '^(%d+) (%d+)$')
    b, e = tonumber(b), tonumber(e)
    if b and e then
      n = n + 1
      used = used + b
      entries[#entries + 1] = {e, b}
      if e <= now then due[#due + 1] = all[i] end
      if e > last then last = e end
    end
  end
end
local function fits(count, bytes)
  return (maxn <= 0 or count + 1 <= maxn) and (maxb <= 0 or bytes + need <= maxb)
end
if fits(n, used) then
  redis.call('HSET', KEYS[1], id, string.format('%.0f %.0f', need, now + keep))
  redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', last + linger))
  local reply = {1, n + 1, used + need, 0}
  for _, d in ipairs(due) do reply[#reply + 1] = d end
  return reply
end
local wait = -1
if maxb <= 0 or need <= maxb then
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  local cn, cb = n, used
  for _, en in ipairs(entries) do
    cn, cb = cn - 1, cb - en[2]
    if fits(cn, cb) then
      wait = math.max(en[1] - now, 0)
      break
    end
  end
end
local reply = {0, n, used, wait}
for _, d in ipairs(due) do reply[#reply + 1] = d end
return reply
