-- The prelude's second part (prelude.lua says how the parts join): the shard's pending set, in
-- leaves. It uses SHARD, KEY, AT_DIGITS, LEAF_MAX and entry_at() from prelude.lua.
-- The pending set (key_schema.hpp): every job's entry, at entry_at() of its record, kept in
-- leaves. Scripts reach it only through the entry_* helpers below, so its layout is theirs
-- alone. Each is told the entry's score: the record's as read (j.e0, which parse() keeps), the
-- new one, or for an entry whose record is unreadable, missing or says it has none (stale), the
-- score the loader read it at (the claim's). A `hint` may be nil or wrong only for such a stale
-- entry: the call then finds it or not, and the claim of the loader that reads it later
-- removes it.
--
-- Why leaves. A sorted set of more than 128 entries is a skiplist and a hash table, about
-- 118 B per entry; one of at most 128 (zset-max-listpack-entries, Redis's default) is a
-- listpack, about 32 B. So the entries live in leaves of at most LEAF_MAX (64: key_schema.hpp
-- says why not 128) entries, which together keep them in the order Redis keeps a sorted set's:
-- by score, then job-id bytes.
-- Each entry has a key, entry_key(score, id) = the score in AT_DIGITS digits, ':', the
-- job-id, whose byte order is that order. A leaf is named by its separator, the key of the
-- first entry it held when it was made; the directory (KEYS[1]) lists the separators, all
-- scored 0, so in byte order. A leaf holds the entries whose key is >= its separator and < the
-- next leaf's: so an entry's leaf is found from its score and id alone (leaf_at(): the last
-- separator <= its key, one ZREVRANGEBYLEX), and a range of scores is read leaf after leaf.
-- Invariants, at every point between two calls:
--   L1  every entry of leaf s has a key >= s, and < the next separator (if any);
--   L2  every leaf has 1..LEAF_MAX entries (never more: Redis does not turn a skiplist back
--       into a listpack), and every separator in the directory names a leaf;
--   L3  SIZE counts the entries of all leaves.
-- A leaf that would grow past LEAF_MAX is split first (its upper half becomes a new leaf), or,
-- for an entry after its last one (jobs that arrive in the order they are due), a new leaf
-- starts at the entry; a leaf that becomes empty leaves the directory; an entry before every
-- leaf goes into the first leaf, renamed to start at it (a new first leaf if that one is full).
-- Leaves are not merged: cancels that hollow a leaf out leave it small (the cost of a leaf's
-- own key and separator, about 100 B, is then shared by fewer entries) until its jobs are due.
-- The set of 0.3, one sorted set (OLD_SET), is moved into leaves by migrate(), a chunk per
-- call, when the shard's loader first reads; until it is empty, an entry not found in a leaf
-- is looked for there too.
-- Per call (begin_pending(), at the end of this file): LEAVES (KEYS[1]), LEAF (a leaf's key: LEAF
-- .. its separator), SIZE, OLD_SET, and size_delta, the entries added minus the entries removed
-- by this call (flush() adds it to SIZE).
local LEAVES, LEAF, SIZE, OLD_SET
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
-- An entry's key: the order of keys is the order of entries (score, then job-id bytes).
-- A score outside 0..10^AT_DIGITS - 1 (a walk's open end) is taken as the nearer end.
local function entry_key(score, id)
  return string.format(KEY_FORMAT, math.min(math.max(score, 0), 10 ^ AT_DIGITS - 1)) .. ':' .. id
end
-- The score a separator starts at.
local function separator_score(s) return tonumber(string.sub(s, 1, AT_DIGITS)) end
-- leaf_at(k) -> the separator of the leaf whose range holds key k, or nil (k is before every leaf).
local function leaf_at(k) return redis.call('ZREVRANGEBYLEX', LEAVES, '[' .. k, '-', 'LIMIT', 0, 1)[1] end
-- first_leaf(), next_leaf(s) -> a separator in directory order, or nil.
local function first_leaf() return redis.call('ZRANGE', LEAVES, 0, 0)[1] end
local function next_leaf(s) return redis.call('ZRANGEBYLEX', LEAVES, '(' .. s, '+', 'LIMIT', 0, 1)[1] end
-- near: the leaf this call last used, so that a run of entries in one leaf (a batch of jobs due
-- together, claimed and marked together) costs one command each: {s = separator, lo, lo_id =
-- where its range starts, hi, hi_id = where the next leaf's starts (nil: none), n = its entries}.
-- Any change to the leaves' bounds forgets it.
local near
local function in_near(score, id)
  if not near or score < near.lo or (score == near.lo and bytes_less(id, near.lo_id)) then return false end
  return not near.hi or score < near.hi or (score == near.hi and bytes_less(id, near.hi_id))
end
-- remember(s): near is leaf s.
local function remember(s)
  local nxt = next_leaf(s)
  near = {s = s, lo = separator_score(s), lo_id = string.sub(s, AT_DIGITS + 2), hi = nxt and separator_score(nxt),
          hi_id = nxt and string.sub(nxt, AT_DIGITS + 2), n = redis.call('ZCARD', LEAF .. s)}
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
    local k = entry_key(score, id)
    local s = leaf_at(k)
    if not s then
      -- Before every leaf (L1): the first leaf starts here from now on, if it has room; else a
      -- new first leaf starts here (or the very first).
      local first = first_leaf()
      if first and redis.call('ZCARD', LEAF .. first) < LEAF_MAX then
        redis.call('RENAME', LEAF .. first, LEAF .. k)
        redis.call('ZREM', LEAVES, first)
      end
      redis.call('ZADD', LEAVES, 0, k)
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
      redis.call('ZADD', LEAVES, 0, k)
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
-- entry_drop(id, hint) -> whether the job had an entry at hint; it has none there now.
local function entry_drop(id, hint)
  if hint then
    if not in_near(hint, id) then
      local s = leaf_at(entry_key(hint, id))
      if s then remember(s) else near = nil end
    end
    if near and redis.call('ZREM', LEAF .. near.s, id) == 1 then
      size_delta = size_delta - 1
      near.n = near.n - 1
      if near.n == 0 then  -- Redis deleted the empty leaf; its range joins the one before (L2)
        redis.call('ZREM', LEAVES, near.s)
        near = nil
      end
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
    if near.n == 0 then
      redis.call('ZREM', LEAVES, near.s)
      near = nil
    end
    run = {}
  end
  for k = 1, #ids do
    local id, hint = ids[k], hints[k]
    if not (hint and in_near(hint, id)) then
      drop_run()
      local s = hint and leaf_at(entry_key(hint, id))
      if s then remember(s) else near = nil end
    end
    if near then run[#run + 1] = id else entry_drop(id, hint) end
  end
  drop_run()
end
-- entry_find(id, hint) -> the entry's score (a number), or nil when the job has none at hint.
local function entry_find(id, hint)
  if hint then
    local s = leaf_at(entry_key(hint, id))
    local score = s and redis.call('ZSCORE', LEAF .. s, id)
    if score then return tonumber(score) end
  end
  local score = redis.call('ZSCORE', OLD_SET, id)
  return score and tonumber(score)
end
-- entries_between(after, upto, limit) -> {id, score, ...}: the entries with after < score <=
-- upto (after nil: from the first), ascending, at most limit (0: all). It reads the leaves
-- that hold them, and the first leaf after.
local function entries_between(after, upto, limit)
  local out = {}
  local low, high = after and '(' .. string.format('%.0f', after) or '-inf', string.format('%.0f', upto)
  local s = (after and leaf_at(entry_key(after + 1, ''))) or first_leaf()
  while s and separator_score(s) <= upto do
    local got
    if limit > 0 then
      got = redis.call('ZRANGEBYSCORE', LEAF .. s, low, high, 'WITHSCORES', 'LIMIT', 0, limit - #out / 2)
    else
      got = redis.call('ZRANGEBYSCORE', LEAF .. s, low, high, 'WITHSCORES')
    end
    for k = 1, #got do out[#out + 1] = got[k] end
    if limit > 0 and #out / 2 >= limit then break end
    s = next_leaf(s)
  end
  return out
end
-- entries_size(): all entries (SIZE, and the set of 0.3 while it is moved).
local function entries_size()
  return (tonumber(redis.call('GET', SIZE)) or 0) + redis.call('ZCARD', OLD_SET)
end
-- entries_count(bounds) -> {n1, n2, ...}: the entries with score in (bounds[k-1], bounds[k]]
-- ((-inf, bounds[1]] first; bounds ascending). The leaves before the one that holds a bound
-- hold only entries at or below it, and the first COUNT_LEAVES of them are counted by their
-- size (one ZCARD each, once for all bounds); past that, a count would block Redis for
-- milliseconds (a million jobs due within the day are 16 000 leaves), so further leaves are
-- counted at the shard's average leaf size: exact up to COUNT_LEAVES * LEAF_MAX jobs before a
-- bound, an estimate above (the console's due timeline).
local COUNT_LEAVES = 1000
local function entries_count(bounds)
  local counts, prev = {}, 0
  local size, leaves = entries_size(), redis.call('ZCARD', LEAVES)
  local average = leaves > 0 and (tonumber(redis.call('GET', SIZE)) or 0) / leaves or 0
  local summed, sum, last = 0, 0, nil  -- the first `summed` leaves hold `sum` entries; last: the last of them
  for b = 1, #bounds do
    local x = bounds[b]
    local upto  -- the entries with score <= x
    if x >= 10 ^ AT_DIGITS then
      upto = size
    else
      local bound = string.format('%.0f', x)
      local at = leaf_at(entry_key(x + 1, ''))  -- the leaf that holds the first key above x
      local before = at and redis.call('ZLEXCOUNT', LEAVES, '-', '(' .. at) or 0
      local whole
      if before <= COUNT_LEAVES then
        if before > summed then
          for _, s in ipairs(redis.call('ZRANGEBYLEX', LEAVES, last and '(' .. last or '-', '(' .. at)) do
            sum = sum + redis.call('ZCARD', LEAF .. s)
            last = s
          end
          summed = before
        end
        whole = sum
      else
        whole = math.floor(before * average + 0.5)
      end
      upto = whole + (at and redis.call('ZCOUNT', LEAF .. at, '-inf', bound) or 0) +
             redis.call('ZCOUNT', OLD_SET, '-inf', bound)
    end
    counts[b] = math.max(0, upto - prev)
    prev = math.max(prev, upto)
  end
  return counts
end
-- entries_first() -> the earliest entry's score, or nil when there is none.
local function entries_first()
  local s = first_leaf()
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
  LEAVES, LEAF, SIZE, OLD_SET = keys[1], SHARD .. KEY.leaf, SHARD .. KEY.size, SHARD .. KEY.set_0_3
  size_delta, near = 0, nil
end
