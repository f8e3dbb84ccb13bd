-- upload_share_charge.lua: charge an upload to its seller's share of Redis, or refuse it. Used by
-- uploadstatus.Store.Create before it writes anything of the upload (the upload's keys are in another
-- hash slot, {<upload_id>}; this script touches only the seller's).
--
-- KEYS[1]  bulkreg:{s:<seller>}:usage  HASH: upload id → "<bytes> <expires>[ <flag>]": what the upload's keys
--          hold (as Store.Create counts it) and when they expire (ms, Redis clock, as far as this record
--          knows: a consumer's late row moves the upload's expiry later, see Store.charge). Flag "p":
--          provisional, the rows not yet recorded are charged the largest result a row can take, and the
--          upload's own slot can tell a smaller bound once they are in (upload_share_measure.lua); flag
--          "g": the tombstone of a deleted or expired upload (its bytes count, it is no upload)
-- ARGV[1]  upload id
-- ARGV[2]  bytes the upload keeps
-- ARGV[3]  how long its keys are kept, in ms
-- ARGV[4]  most bytes the seller's uploads may keep (0 = no bound)
-- ARGV[5]  most uploads the seller may keep (0 = no bound)
-- ARGV[6]  the longest an upload is kept, in ms (the store's retention): the record itself is kept this long
--          after its latest entry's expiry, since a consumer's late row can keep an upload past the expiry
--          its entry knows
-- ARGV[7]  the new entry's flag ("p" or "")
--
-- The upload's own entry (the same file sent again, or a tombstone of it) is replaced, not counted twice.
-- An entry whose expiry has passed still counts here: the caller asks Redis whether that upload is gone
-- and settles it (upload_share_settle.lua) before it takes a refusal as final; likewise it measures the
-- provisional entries before a refusal is final.
--
-- Reply: {1, uploads, bytes, 0, d, due ...} when charged (the seller's usage with this upload);
-- {0, uploads, bytes, wait, d, due ..., provisional ...} when refused: the seller's usage without this
-- upload; wait, in ms, until enough of the seller's entries expire for this upload to fit (-1: it never
-- fits, it is larger than the whole share). d is the number of due entries that follow, each an id and its
-- value: the entries whose expiry has passed, for the caller to settle. A refusal then lists the
-- provisional entries not yet due, each an id and its value, for the caller to measure.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, need, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local maxb, maxn, linger = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local all = redis.call('HGETALL', KEYS[1])
local entries, due, prov = {}, {}, {}
local n, used, last = 0, 0, now + keep
for i = 1, #all, 2 do
  if all[i] ~= id then
    local b, e, f = string.match(all[i + 1], '^(%d+) (%d+) ?(%a*)$')
    b, e = tonumber(b), tonumber(e)
    if b and e then
      local up = 1
      if f == 'g' then up = 0 end
      n = n + up
      used = used + b
      entries[#entries + 1] = {e, b, up}
      if e <= now then
        due[#due + 1] = all[i]
        due[#due + 1] = all[i + 1]
      elseif f == 'p' then
        prov[#prov + 1] = all[i]
        prov[#prov + 1] = all[i + 1]
      end
      if e > last then last = e end
    end
  end
end
local function fits(count, bytes)
  return (maxn <= 0 or count + 1 <= maxn) and (maxb <= 0 or bytes + need <= maxb)
end
local reply
if fits(n, used) then
  local v = string.format('%.0f %.0f', need, now + keep)
  if ARGV[7] ~= '' then v = v .. ' ' .. ARGV[7] end
  redis.call('HSET', KEYS[1], id, v)
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 or now + pttl < last + linger then
    redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', last + linger))
  end
  reply = {1, n + 1, used + need, 0, #due / 2}
  for _, d in ipairs(due) do reply[#reply + 1] = d end
  return reply
end
local wait = -1
if maxb <= 0 or need <= maxb then
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  local cn, cb = n, used
  for _, en in ipairs(entries) do
    cn, cb = cn - en[3], cb - en[2]
    if fits(cn, cb) then
      wait = math.max(en[1] - now, 0)
      break
    end
  end
end
reply = {0, n, used, wait, #due / 2}
for _, d in ipairs(due) do reply[#reply + 1] = d end
for _, p in ipairs(prov) do reply[#reply + 1] = p end
return reply
