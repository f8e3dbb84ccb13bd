-- fits.lua: where the next slot of a sliding log goes. throttle.New prepends this file to
-- reserve.lua and reserve_global.lua: it takes no KEYS[1] or ARGV[1] of its own and has no
-- Reply; it defines earliest(log, limit, win, at) and fits(log, limit, win, a) for them.
--
-- Appending after the log's last `limit` slots (s(n-L+1) + W' + 1µs) is always allowed, but
-- it loses room the log still has before slots booked ahead:
--   - a seller's slot that went by unused (its call could not start in time) is given back,
--     but the seller's next window is already booked after it, so a new slot would go behind
--     those: the seller would take a window longer for one late call;
--   - a seller with 500 rows books the next app-wide window at its own (later) slots while
--     the current one still has room; small sellers asking then would be put behind it.
-- A slot at `a` is allowed when every window [x - W', x] that would hold it (x from a to
-- a + W') holds fewer than `limit`: the one ending at a, and the ones ending at each booked
-- slot in (a, a + W']. Closed windows: the same strictness as the extra microsecond.
-- The callers ask only when appending would place the slot later than `a`; the first
-- ZCOUNT answers at once while the window ending at `a` is full (the limit binds), and
-- otherwise it reads the at most 2L slots within W' of a.
local function fits(log, limit, win, a)
  local function us(x) return string.format('%d', x) end
  if redis.call('ZCOUNT', log, us(a - win), us(a)) >= limit then return false end
  local r = redis.call('ZRANGEBYSCORE', log, us(a - win), us(a + win), 'WITHSCORES')
  local s = {}
  for i = 2, #r, 2 do s[#s + 1] = tonumber(r[i]) end
  local lo = 1
  for j = 1, #s do
    if s[j] > a then
      while s[lo] < s[j] - win do lo = lo + 1 end
      if j - lo + 1 >= limit then return false end
    end
  end
  return true
end

-- earliest: the earliest slot at or after `at` that keeps every window of W' at fewer than
-- `limit` + 1 slots of `log` (scores sorted s1 <= ... <= sn, slots booked ahead included):
-- `at` when fewer than `limit` slots are left or `at` fits, else s(n-L+1) + W' + 1µs.
-- memo, optional, carries what one script learnt between the slots it books in a row (the
-- log only grows meanwhile): memo.n the log's size (the caller adds what its ZADDs added),
-- memo.refused an `at` that did not fit, which no added slot can make fit.
local function earliest(log, limit, win, at, memo)
  memo = memo or {}
  local n = memo.n
  if not n then
    n = redis.call('ZCARD', log)
    memo.n = n
  end
  if n < limit then return at end
  local s = redis.call('ZRANGE', log, n - limit, n - limit, 'WITHSCORES')
  local bound = tonumber(s[2]) + win + 1
  if bound <= at then return at end
  if memo.refused ~= at then
    if fits(log, limit, win, at) then return at end
    memo.refused = at
  end
  return bound
end
