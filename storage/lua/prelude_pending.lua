-- The prelude's second part (prelude.lua says how the parts join): the shard's pending set, in
-- windows of leaves. It uses SHARD, KEY, AT_DIGITS, WINDOW_MS, LEAF_MAX and entry_at() from
-- prelude.lua.
-- The pending set (key_schema.hpp): every job's entry, at entry_at() of its record. Scripts
-- reach it only through the entry_* helpers below, so its layout is theirs alone. Each is told
-- the entry's score: the record's as read (j.e0, which parse() keeps), the new one, or for an
-- entry whose record is unreadable, missing or says it has none (stale), the score the loader
-- read it at (the claim's). A `hint` may be nil or wrong only for such a stale entry: the call
-- then finds it or not, and the claim of the loader that reads it later removes it.
--
-- Why leaves. A sorted set of more than 128 entries is a skiplist and a hash table, about
-- 118 B per entry; one of at most 128 (zset-max-listpack-entries, Redis's default) is a
-- listpack, about 32 B. So the entries live in leaves of at most LEAF_MAX (64: key_schema.hpp
-- says why not 128), which together keep them in the order Redis keeps a sorted set's: by
-- score, then job-id bytes.
-- Why windows. Leaves found through one directory a shard cost an insert two walks of that
-- directory, and at ten million jobs scattered over a day it no longer stays in the cache: the
-- insert cost grew with the backlog (docs/performance/scale.md, "Ten million waiting"). So each window
-- of scores (WINDOW_MS, a minute) has a directory of its own, named by arithmetic from the
-- score: an insert reads one small directory (a listpack while the window holds fewer than 128
-- leaves), found without a walk. The shard's directory of windows (KEYS[1], WINDOWS) lists the
-- windows that hold entries, each scored by its number, so that a range of scores is read
-- window after window; it is written only when a window gains its first leaf or loses its last.
-- Each entry has a key, entry_key(score, id) = the score in AT_DIGITS digits, ':', the job-id,
-- whose byte order is that order. A leaf is named by its separator, the key of the first entry
-- it held when it was made (LEAF .. separator); its window's directory (window_key(n)) lists the
-- separators of the window's leaves, all scored 0, so in byte order. A leaf holds the entries of
-- its window whose key is >= its separator and < the next leaf's of the window: so an entry's
-- leaf is found from its score and id alone (leaf_at(): the last separator <= its key in the
-- directory of its window, one ZREVRANGEBYLEX), and a range of scores is read leaf after leaf.
-- Invariants, at every point between two calls:
--   S1  every separator in window n's directory starts with a score of window n
--       (window_of(score) = n), and window n is in WINDOWS exactly when its directory exists;
--   L1  every entry of leaf s has a key >= s, and < the next separator of its window (if any),
--       and the score of its window;
--   L2  every leaf has 1..LEAF_MAX entries (never more: Redis does not turn a skiplist back
--       into a listpack), and every separator in a directory names a leaf;
--   L3  SIZE counts the entries of all leaves.
-- A leaf that would grow past LEAF_MAX is split first (its upper half becomes a new leaf), or,
-- for an entry after its last one (jobs that arrive in the order they are due), a new leaf
-- starts at the entry; a leaf that becomes empty leaves its directory (and a window whose last
-- leaf goes, WINDOWS); an entry before every leaf of its window goes into the window's first
-- leaf, renamed to start at it (a new first leaf if that one is full, or the window's first).
-- Leaves are not merged: cancels that hollow a leaf out leave it small until its jobs are due.
-- The set of 0.3, one sorted set (OLD_SET), is moved into leaves by migrate(), a chunk per
-- call, when the shard's loader first reads; until it is empty, an entry not found in a leaf
-- is looked for there too.
-- Per call (begin_pending(), at the end of this file): WINDOWS (KEYS[1]), LEAF (a leaf's key:
-- LEAF .. its separator), WINDOW (a window's directory: WINDOW .. its number), SIZE, OLD_SET,
-- and size_delta, the entries added minus the entries removed by this call (flush() adds it to
-- SIZE); LEAVES and AT, the directory of the window the helpers last used and its number.
local WINDOWS, LEAF, WINDOW, SIZE, OLD_SET
local LEAVES, AT
local size_delta
local KEY_FORMAT = '%0' .. AT_DIGITS .. '.0f'
-- a < b in byte order, as Redis orders members (Lua's own < follows the locale's collation).
local function bytes_less(a, b)
  for k = 1, math.min(#a, #b) do
    local x, y = string.byte(a, k), string.byte(b, k)
    if x ~= y then return x < y end
  end
  return #a < #b
end
-- A whole number as Redis reads it (no exponent).
local function whole(x) return string.format('%.0f', x) end
-- An entry's key: the order of keys is the order of entries (score, then job-id bytes).
-- A score outside 0..10^AT_DIGITS - 1 (a walk's open end) is taken as the nearer end.
local function clamp(score) return math.min(math.max(score, 0), 10 ^ AT_DIGITS - 1) end
local function entry_key(score, id) return string.format(KEY_FORMAT, clamp(score)) .. ':' .. id end
-- The score a separator starts at.
local function separator_score(s) return tonumber(string.sub(s, 1, AT_DIGITS)) end
-- window_of(score) -> the number of the window a score falls in (clamped as entry_key() does);
-- window_key(n) -> its directory's key.
local function window_of(score) return math.floor(clamp(score) / WINDOW_MS) end
local function window_key(n) return WINDOW .. whole(n) end
-- first_window(from) -> the number of the earliest window >= from (nil: from the first) that
-- holds entries, or nil; next_window(n) -> the same after n.
local function first_window(from)
  local got = redis.call('ZRANGEBYSCORE', WINDOWS, from and whole(from) or '-inf', '+inf', 'LIMIT', 0, 1)[1]
  return got and tonumber(got)
end
local function next_window(n) return first_window(n + 1) end
-- near: the leaf this call last used, so that a run of entries in one leaf (a batch of jobs due
-- together, claimed and marked together) costs one command each: {s = separator, lo, lo_id =
-- where its range starts, hi, hi_id = where the next leaf's starts (nil: the window's end),
-- n = its entries}; it is a leaf of window AT. Any change to the leaves' bounds forgets it.
local near
-- use_window(n): the helpers below work in window n's directory (LEAVES).
local function use_window(n)
  if AT ~= n then
    AT, LEAVES, near = n, window_key(n), nil
  end
end
local function in_near(score, id)
  if not near or window_of(score) ~= AT or score < near.lo or (score == near.lo and bytes_less(id, near.lo_id)) then
    return false
  end
  return not near.hi or score < near.hi or (score == near.hi and bytes_less(id, near.hi_id))
end
-- leaf_at(k) -> the separator of the leaf of the current window whose range holds key k, or nil
-- (k is before every leaf of it).
local function leaf_at(k) return redis.call('ZREVRANGEBYLEX', LEAVES, '[' .. k, '-', 'LIMIT', 0, 1)[1] end
-- first_leaf(), next_leaf(s) -> a separator of the current window in directory order, or nil.
local function first_leaf() return redis.call('ZRANGE', LEAVES, 0, 0)[1] end
local function next_leaf(s) return redis.call('ZRANGEBYLEX', LEAVES, '(' .. s, '+', 'LIMIT', 0, 1)[1] end
-- remember(s): near is leaf s (of the current window).
local function remember(s)
  local nxt = next_leaf(s)
  near = {s = s, lo = separator_score(s), lo_id = string.sub(s, AT_DIGITS + 2), hi = nxt and separator_score(nxt),
          hi_id = nxt and string.sub(nxt, AT_DIGITS + 2), n = redis.call('ZCARD', LEAF .. s)}
end
-- add_leaf(k): a new leaf starts at k in the current window (listed in WINDOWS if it is the
-- window's first).
local function add_leaf(k)
  if redis.call('ZADD', LEAVES, 0, k) == 1 and redis.call('ZCARD', LEAVES) == 1 then
    redis.call('ZADD', WINDOWS, AT, whole(AT))
  end
end
-- drop_leaf(s): the emptied leaf s leaves the current window's directory (and the window
-- WINDOWS, if it was its last): its range joins the one before (L2).
local function drop_leaf(s)
  redis.call('ZREM', LEAVES, s)
  if redis.call('EXISTS', LEAVES) == 0 then redis.call('ZREM', WINDOWS, whole(AT)) end
  near = nil
end
-- split(s) -> the separator of the new leaf that now holds the upper half of the full leaf s.
local function split(s)
  local half = math.floor(LEAF_MAX / 2)
  local upper = redis.call('ZRANGE', LEAF .. s, half, -1, 'WITHSCORES')  -- {id, score, ...}
  local ns = entry_key(tonumber(upper[2]), upper[1])
  local args = {}
  for k = 1, #upper, 2 do
    args[k], args[k + 1] = upper[k + 1], upper[k]
  end
  redis.call('ZADD', LEAF .. ns, unpack(args))
  redis.call('ZREMRANGEBYRANK', LEAF .. s, half, -1)
  redis.call('ZADD', LEAVES, 0, ns)
  near = nil
  return ns
end
-- entry_put(id, score): the job's entry is at score (none elsewhere: the caller moved it
-- with entry_move() if it had one). score: whole epoch ms.
local function entry_put(id, score)
  if not in_near(score, id) then
    use_window(window_of(score))
    local k = entry_key(score, id)
    local s = leaf_at(k)
    if not s then
      -- Before every leaf of the window (L1): its first leaf starts here from now on, if it has
      -- room; else a new first leaf starts here (or the window's very first).
      local first = first_leaf()
      if first and redis.call('ZCARD', LEAF .. first) < LEAF_MAX then
        redis.call('RENAME', LEAF .. first, LEAF .. k)
        redis.call('ZREM', LEAVES, first)
      end
      add_leaf(k)
      s = k
    end
    remember(s)
  end
  if near.n >= LEAF_MAX then
    local s, k = near.s, entry_key(score, id)
    local last = redis.call('ZRANGE', LEAF .. s, -1, -1, 'WITHSCORES')
    if bytes_less(entry_key(tonumber(last[2]), last[1]), k) then
      -- After the full leaf's last entry (jobs that arrive in the order they are due): a new
      -- leaf starts here, and the full one stays full.
      add_leaf(k)
      remember(k)
    else
      local ns = split(s)
      remember(bytes_less(k, ns) and s or ns)
    end
  end
  local added = redis.call('ZADD', LEAF .. near.s, score, id)
  near.n = near.n + added
  size_delta = size_delta + added
end
-- entries_put(args): entry_put() for each pair of the flat list {score, id, score, id, ...};
-- a run of them that falls in one leaf with room for all is added in one ZADD.
local function entries_put(args)
  local run = {}
  local function add_run()
    if #run == 0 then return end
    local added = redis.call('ZADD', LEAF .. near.s, unpack(run))
    near.n = near.n + added
    size_delta = size_delta + added
    run = {}
  end
  for k = 1, #args, 2 do
    local score, id = tonumber(args[k]), args[k + 1]
    if in_near(score, id) and near.n + #run / 2 < LEAF_MAX then
      run[#run + 1] = score
      run[#run + 1] = id
    else
      add_run()
      entry_put(id, score)
    end
  end
  add_run()
end
-- find_near(hint, id): near is the leaf that would hold the entry (hint, id), or nil (none).
local function find_near(hint, id)
  if in_near(hint, id) then return end
  use_window(window_of(hint))
  local s = leaf_at(entry_key(hint, id))
  if s then remember(s) else near = nil end
end
-- entry_drop(id, hint) -> whether the job had an entry at hint; it has none there now.
local function entry_drop(id, hint)
  if hint then
    find_near(hint, id)
    if near and redis.call('ZREM', LEAF .. near.s, id) == 1 then
      size_delta = size_delta - 1
      near.n = near.n - 1
      if near.n == 0 then drop_leaf(near.s) end  -- Redis deleted the empty leaf
      return true
    end
  end
  return redis.call('ZREM', OLD_SET, id) == 1
end
-- entries_drop(ids, hints): entry_drop() for each ids[k] at hints[k] (nil: unknown); a run of
-- them in one leaf is removed in one ZREM (and looked for in the set of 0.3 if not all were there).
local function entries_drop(ids, hints)
  local run = {}
  local function drop_run()
    if #run == 0 then return end
    local gone = redis.call('ZREM', LEAF .. near.s, unpack(run))
    size_delta = size_delta - gone
    near.n = near.n - gone
    if gone < #run then redis.call('ZREM', OLD_SET, unpack(run)) end
    if near.n == 0 then drop_leaf(near.s) end
    run = {}
  end
  for k = 1, #ids do
    local id, hint = ids[k], hints[k]
    if not (hint and in_near(hint, id)) then
      drop_run()
      if hint then find_near(hint, id) else near = nil end
    end
    if near then run[#run + 1] = id else entry_drop(id, hint) end
  end
  drop_run()
end
-- entry_find(id, hint) -> the entry's score (a number), or nil when the job has none at hint.
local function entry_find(id, hint)
  if hint then
    find_near(hint, id)
    local score = near and redis.call('ZSCORE', LEAF .. near.s, id)
    if score then return tonumber(score) end
  end
  local score = redis.call('ZSCORE', OLD_SET, id)
  return score and tonumber(score)
end
-- entries_between(after, upto, limit) -> {id, score, ...}: the entries with after < score <=
-- upto (after nil: from the first), ascending, at most limit (0: all). It reads the windows that
-- hold them (WINDOWS a hundred at a time), and in each the leaves that hold them and the first after.
local function entries_between(after, upto, limit)
  local out = {}
  local low, high = after and '(' .. whole(after) or '-inf', whole(upto)
  local from, last = after and whole(window_of(after)) or '-inf', whole(window_of(upto))
  while true do
    local windows = redis.call('ZRANGEBYSCORE', WINDOWS, from, last, 'LIMIT', 0, 100)
    for _, n in ipairs(windows) do
      use_window(tonumber(n))
      -- In the window that holds after + 1, the leaf that holds it; in a later one, the first.
      local s = (after and AT == window_of(after + 1) and leaf_at(entry_key(after + 1, ''))) or first_leaf()
      while s and separator_score(s) <= upto do
        local got
        if limit > 0 then
          got = redis.call('ZRANGEBYSCORE', LEAF .. s, low, high, 'WITHSCORES', 'LIMIT', 0, limit - #out / 2)
        else
          got = redis.call('ZRANGEBYSCORE', LEAF .. s, low, high, 'WITHSCORES')
        end
        for k = 1, #got do out[#out + 1] = got[k] end
        if limit > 0 and #out / 2 >= limit then return out end
        s = next_leaf(s)
      end
    end
    if #windows < 100 then return out end
    from = '(' .. windows[#windows]
  end
end
-- entries_size(): all entries (SIZE, and the set of 0.3 while it is moved).
local function entries_size()
  return (tonumber(redis.call('GET', SIZE)) or 0) + redis.call('ZCARD', OLD_SET)
end
-- entries_count(bounds) -> {n1, n2, ...}: the entries with score in (bounds[k-1], bounds[k]]
-- ((-inf, bounds[1]] first; bounds ascending). The windows before the one that holds a bound hold
-- only entries below it, and the first COUNT_LEAVES leaves of them are counted by their size
-- (one ZCARD each, once for all bounds); past that, a count would block Redis for milliseconds
-- (a million jobs due within the day are 16 000 leaves), so the further windows are counted at
-- the shard's average window: exact up to COUNT_LEAVES leaves before a bound, an estimate above
-- (the console's due timeline). In the bound's own window, its leaves before the bound are
-- counted one by one.
local COUNT_LEAVES = 1000
local function entries_count(bounds)
  local counts, prev = {}, 0
  local size, windows = entries_size(), redis.call('ZCARD', WINDOWS)
  local average = windows > 0 and (tonumber(redis.call('GET', SIZE)) or 0) / windows or 0
  -- The first `summed` windows hold `sum` entries; `last`: the last of them; `leaves`: how
  -- many leaves they have; `exact`: whether they were all counted.
  local summed, sum, last, leaves, exact = 0, 0, nil, 0, true
  for b = 1, #bounds do
    local x = bounds[b]
    local upto  -- the entries with score <= x
    if x >= 10 ^ AT_DIGITS then
      upto = size
    else
      local at = window_of(x)
      local before = redis.call('ZCOUNT', WINDOWS, '-inf', '(' .. whole(at))
      if exact and before > summed then
        for _, n in ipairs(redis.call('ZRANGEBYSCORE', WINDOWS, last and '(' .. last or '-inf', '(' .. whole(at),
                                      'LIMIT', 0, before - summed)) do
          if leaves >= COUNT_LEAVES then
            exact = false
            break
          end
          for _, s in ipairs(redis.call('ZRANGE', window_key(tonumber(n)), 0, -1)) do
            sum = sum + redis.call('ZCARD', LEAF .. s)
            leaves = leaves + 1
          end
          summed, last = summed + 1, n
        end
      end
      local whole_seconds = sum + (before > summed and math.floor((before - summed) * average + 0.5) or 0)
      -- In x's own window: its leaves before the one that holds the first key above x, and that one's.
      -- (A window of a burst can hold thousands of leaves: past COUNT_LEAVES of them, the rest
      -- are counted at the average of those.)
      use_window(at)
      local s = leaf_at(entry_key(x + 1, ''))
      local own = 0
      if s then
        local firsts = redis.call('ZRANGEBYLEX', LEAVES, '-', '(' .. s, 'LIMIT', 0, COUNT_LEAVES)
        for _, t in ipairs(firsts) do own = own + redis.call('ZCARD', LEAF .. t) end
        if #firsts == COUNT_LEAVES then
          local more = redis.call('ZLEXCOUNT', LEAVES, '-', '(' .. s) - COUNT_LEAVES
          own = own + math.floor(more * own / COUNT_LEAVES + 0.5)
        end
        own = own + redis.call('ZCOUNT', LEAF .. s, '-inf', whole(x))
      end
      upto = whole_seconds + own + redis.call('ZCOUNT', OLD_SET, '-inf', whole(x))
    end
    counts[b] = math.max(0, upto - prev)
    prev = math.max(prev, upto)
  end
  return counts
end
-- entries_first() -> the earliest entry's score, or nil when there is none.
local function entries_first()
  local n = first_window(nil)
  local s
  if n then
    use_window(n)
    s = first_leaf()
  end
  local r = s and redis.call('ZRANGE', LEAF .. s, 0, 0, 'WITHSCORES') or {}
  local o = redis.call('ZRANGE', OLD_SET, 0, 0, 'WITHSCORES')
  local a, b = r[2] and tonumber(r[2]), o[2] and tonumber(o[2])
  if a and b then return math.min(a, b) end
  return a or b
end
-- entry_move(id, j[, again]): the job's entry follows its record j: from j.e0 (nil: none) to
-- entry_at(j) (nil: none); j.e0 says so after. With `again`, the entry is put even where j.e0
-- says it already is (a replayed write, or an entry lost with a Redis restart: put back).
local function entry_move(id, j, again)
  local to = entry_at(j)
  if to ~= j.e0 or again then
    if j.e0 and j.e0 ~= to then entry_drop(id, j.e0) end
    if to then entry_put(id, to) end
  end
  j.e0 = to
  return to
end
-- begin_pending(keys): this part's state for a call with these KEYS (after begin_record()).
local function begin_pending(keys)
  WINDOWS, LEAF, WINDOW = keys[1], SHARD .. KEY.leaf, SHARD .. KEY.window
  SIZE, OLD_SET = SHARD .. KEY.size, SHARD .. KEY.set_0_3
  LEAVES, AT, size_delta, near = nil, nil, 0, nil
end
