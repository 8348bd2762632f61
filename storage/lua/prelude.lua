-- The prelude: the shared helpers and locals of every batch script, which is this text followed
-- by the script's own (lua_scripts.hpp documents the keys, ARGV[1..4], fencing and the record).
--
-- Shared helpers. parse(v) -> job table {st, st0, at, att, biz, biz0, f = {name = value}, payload}
-- or nil (st0 and biz0: the state and business as read, for the indexes). write(key, job, ex)
-- SETs the record, with EX ex when ex > 0, and moves the job between the state indexes (and out
-- of a waiting index) when its state or business changed. enc() percent-encodes whitespace and
-- '%' so that free text (an error) fits in one field. bump() counts; flush() writes counts.
local FIRST = 6  -- KEYS index of the first job record; its arguments start at ARGV[5]
-- STATES, FIELDS (in the order write() puts them), AT_DIGITS and ATT_DIGITS come before this
-- text: the build writes them from storage/job_record.hpp, the one list C++ reads too; and
-- WAITING_MAX, LEAF_MAX and KEY (what follows "<prefix>:{<shard>}" in the name of each key of
-- the shard a script builds), from key_schema.hpp.
-- The shard's key prefix "<prefix>:{<shard>}", from KEYS[1] ("<prefix>:{<shard>}:pending:leaves";
-- the prefix and the shard hold no '}'): a job's history list and the shard's wake list live
-- beside its other keys, in the same hash slot.
local SHARD = string.match(KEYS[1], '^[^}]*}')
local now, retention, extra = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local stamp, fence = ARGV[1], ARGV[4]
-- A job's record key from its id, and back.
local function job_key(id) return SHARD .. KEY.job .. id end
local function id_of(key) return string.sub(key, #SHARD + #KEY.job + 1) end
local function hist_key(key) return SHARD .. KEY.history .. id_of(key) end
-- The shard's hash of delay records (key_schema.hpp): a job's record is its field there while
-- the job is delay, and the string job_key(id) in any other state; never both.
local JOBS = SHARD .. KEY.jobs
-- where[id]: where this call last found or put the job's record, 'hash', 'key' or 'none' (nil:
-- not looked); write() deletes the record from the other place unless it knows it is not there.
local where = {}
-- An epoch-ms field's value as a number: 1 to AT_DIGITS digits, as deliver_at is; else nil.
local function ms(s)
  if s and #s <= AT_DIGITS and string.find(s, '^%d+$') then return tonumber(s) end
  return nil
end
-- The pending entry's score is always what the job's record says (job_record.hpp,
-- pending_score(): the same rule in C++, and record_codec_diff_test.cpp checks that the two
-- agree): entry_at(j) is the later of deliver_at and nb for a delay job (nb, not before: a
-- retry's time, an operator's retry, a passed ack deadline delivered again), nb for a ready or
-- running job (its ack deadline, when its business has one), and nil for a job that has no
-- entry. So every script that moves an entry writes nb in the same call, and an entry can be
-- found from its record alone.
local function entry_at(j)
  local nb = ms(j.f.nb)
  if j.st == 'delay' then return math.max(j.at, nb or 0) end
  if j.st == 'ready' or j.st == 'running' then return nb end
  return nil
end
local function parse(v, with_payload)
  if type(v) ~= 'string' then return nil end
  local nl = string.find(v, '\n', 1, true)
  if not nl then return nil end
  -- The first line is matched in place (no copy of it): its end is the first newline, and no
  -- capture crosses it ([^\n] below, and %S for the business).
  local st, at, att, biz, rest = string.match(v, '^(%l+) (%d+) (%d+) (%S+)([^\n]*)\n')
  if not st or not STATES[st] or #at > AT_DIGITS or #att > ATT_DIGITS then return nil end
  -- Every byte after the business is in a field " <name>=<value>" (job_record.hpp's grammar, as
  -- C++ reads it). This used to skip whatever did not look like a field (a tab, a word without
  -- '=', a doubled space): a damaged record was delivered with part of its line ignored, which
  -- write() then dropped. Now it is corrupt, here as in C++.
  local f, from = {}, 1
  while from <= #rest do
    local _, last, k, val = string.find(rest, '^ ([%w_]+)=(%S*)', from)
    if not last then return nil end
    f[k] = val
    from = last + 1
  end
  local j = {st = st, st0 = st, at = tonumber(at), att = tonumber(att), biz = biz, biz0 = biz, f = f}
  if with_payload then j.payload = string.sub(v, nl + 1) end
  j.e0 = entry_at(j)  -- where the job's pending entry is, as read (nil: it has none)
  return j
end
-- The state indexes (key_schema.hpp): <prefix>:{<shard>}:state:<state> lists the shard's jobs
-- whose record is in that state, other than delay (the pending set lists those), scored by
-- when the job entered it (epoch ms). Moved in the same call as the record, so they agree at
-- every crash point; flush() trims what the retention has expired. indexed: states entered in
-- this call.
local function state_key(st) return SHARD .. KEY.state .. st end
local indexed = {}
-- enter(id, st, left): the job `id` is now in state st, and was in `left` (nil: no record, or
-- one that did not parse; 'delay': in no state index).
local function enter(id, st, left)
  if left == st then return end
  if left and left ~= 'delay' then redis.call('ZREM', state_key(left), id) end
  if st ~= 'delay' then
    redis.call('ZADD', state_key(st), stamp, id)
    indexed[st] = true
  end
end
-- enter_all(ids, st): enter(id, st, 'delay') for each of ids (at least one), in one ZADD.
local function enter_all(ids, st)
  local args = {}
  for k, id in ipairs(ids) do
    args[2 * k - 1] = stamp
    args[2 * k] = id
  end
  redis.call('ZADD', state_key(st), unpack(args))
  indexed[st] = true
end
-- The waiting index (key_schema.hpp): <prefix>:{<shard>}:waiting:<business> lists the shard's
-- delay jobs of one business, scored as in the pending set, so that the console pages through a
-- rare business's waiting jobs without walking everyone's. It is kept for a business only
-- while the shard holds at most WAITING_MAX of its delay jobs (a business with more is common
-- enough for a walk of the pending set to find a page soon, and the index then costs nothing);
-- the hash <prefix>:{<shard>}:waiting says for which:
--   'on'    kept: it lists every delay job of the business (and maybe stale entries of records
--           that were corrupt or missing when claimed, which a walk checks against the record)
--   'off'   not kept: it had more than WAITING_MAX entries, or the business had delay jobs when
--           its index started (from a delayd before it); 'on' again once the stats hash counts
--           none of the business's jobs delay in the shard
--   absent  not known yet: this call indexes the business's jobs, and flush() says 'on' if the
--           shard held none of them before the call, else 'off'
-- Entries move in the same call as the pending entries (wadd, pend, and write() for a job that
-- leaves delay or changes business), so at every crash point the index agrees with the records.
local WAITING = SHARD .. KEY.waiting_marks
local function wkey(biz) return SHARD .. KEY.waiting .. biz end
local wmark, wadded = {}, {}  -- business -> 'on' | 'off' | 'new' (as read once); -> true if added to
local function wstate(biz)
  local m = wmark[biz]
  if not m then
    m = redis.call('HGET', WAITING, biz) or 'new'
    wmark[biz] = m
  end
  return m
end
-- Whether the business's waiting index is kept (or about to start) in this shard.
local function windexed(biz) return biz ~= '-' and wstate(biz) ~= 'off' end
-- wadd(id, biz, score): the delay job is in its business's waiting index at `score` (its pending
-- entry's). wdel(id, biz): it is not (any more).
local function wadd(id, biz, score)
  if windexed(biz) then
    redis.call('ZADD', wkey(biz), score, id)
    wadded[biz] = true
  end
end
local function wdel(id, biz)
  if windexed(biz) then redis.call('ZREM', wkey(biz), id) end
end
-- The same for a batch's plain jobs, gathered and written per business in one command each (so
-- that Redis spends its time on the jobs, not on calls from Lua): wadd_later() and wdel_later()
-- note, wflush() writes what they noted (adds, then removes; a script that notes both for one
-- job, or touches the index any other way meanwhile, calls wflush() in between, so that every
-- entry ends as it would have one job at a time). flush() calls it first.
local wlater = {}  -- business -> {adds = {score, id, ...}, dels = {id, ...}}
local function wnote(biz)
  local w = wlater[biz]
  if not w then
    w = {adds = {}, dels = {}}
    wlater[biz] = w
  end
  return w
end
local function wadd_later(id, biz, score)
  if windexed(biz) then
    local adds = wnote(biz).adds
    adds[#adds + 1] = score
    adds[#adds + 1] = id
    wadded[biz] = true
  end
end
local function wdel_later(id, biz)
  if windexed(biz) then
    local dels = wnote(biz).dels
    dels[#dels + 1] = id
  end
end
local WLATER_CHUNK = 1000  -- arguments per command at most (Lua's unpack() has a stack limit)
local function wflush()
  for biz, w in pairs(wlater) do
    for k = 1, #w.adds, WLATER_CHUNK do
      redis.call('ZADD', wkey(biz), unpack(w.adds, k, math.min(k + WLATER_CHUNK - 1, #w.adds)))
    end
    for k = 1, #w.dels, WLATER_CHUNK do
      redis.call('ZREM', wkey(biz), unpack(w.dels, k, math.min(k + WLATER_CHUNK - 1, #w.dels)))
    end
  end
  wlater = {}
end
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
local LEAVES = KEYS[1]
local LEAF = SHARD .. KEY.leaf  -- a leaf's key: LEAF .. its separator
local SIZE = SHARD .. KEY.size
local OLD_SET = SHARD .. KEY.set_0_3
local KEY_FORMAT = '%0' .. AT_DIGITS .. '.0f'
local size_delta = 0  -- entries added minus entries removed by this call; flush() adds it to SIZE
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
local near = nil
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
-- pend(id, j): the delay job j's pending entry (and its waiting index entry) at entry_at(j),
-- moved from where it was (j.e0), or put back there if it was lost.
local function pend(id, j) wadd(id, j.biz, entry_move(id, j, true)) end
local function write(key, j, ex)
  local id = id_of(key)
  enter(id, j.st, j.st0)
  if j.st0 == 'delay' and (j.st ~= 'delay' or j.biz ~= j.biz0) then wdel(id, j.biz0) end
  j.st0, j.biz0 = j.st, j.biz
  local parts = {j.st, string.format('%.0f', j.at), tostring(j.att), j.biz}
  -- z (a compressed payload, payload_compression.hpp) goes with the payload it describes.
  if not j.payload or j.payload == '' then j.f.z = nil end
  for _, k in ipairs(FIELDS) do
    if j.f[k] then parts[#parts + 1] = k .. '=' .. j.f[k] end
  end
  local v = table.concat(parts, ' ') .. '\n' .. (j.payload or '')
  -- Its place by its state (a delay record never expires: ex applies to the others).
  local was = where[id]
  if j.st == 'delay' then
    redis.call('HSET', JOBS, id, v)
    if was ~= 'hash' and was ~= 'none' then redis.call('DEL', key) end
    where[id] = 'hash'
  else
    if ex > 0 then redis.call('SET', key, v, 'EX', ex) else redis.call('SET', key, v) end
    if was ~= 'key' and was ~= 'none' then redis.call('HDEL', JOBS, id) end
    where[id] = 'key'
  end
  -- The history expires with the record (and lives while the record lives).
  if j.f.h then
    if ex > 0 then redis.call('EXPIRE', hist_key(key), ex) else redis.call('PERSIST', hist_key(key)) end
  end
end
-- Whether the job repeats (an interval or a calendar: RepeatRule in repeat_rule.hpp). The one
-- test of it, for every script.
local function repeats(j) return j.f.every ~= nil or j.f.cron ~= nil end
local function enc(s)
  return (string.gsub(s, '[%%%s]', function(c) return string.format('%%%02X', string.byte(c)) end))
end
-- hist(key, j, event, detail): one line "<now> <event> <attempt> <detail>" at the end of the
-- job's history (the last HISTORY_MAX kept; trimmed only when longer); marks the record (h=1) so that its later writes go the
-- slow way, which keeps the history. Call it before write().
local HISTORY_MAX = 100
local function hist(key, j, event, detail)
  local hk = hist_key(key)
  local n = redis.call('RPUSH', hk, ARGV[1] .. ' ' .. event .. ' ' .. tostring(j.att) .. ' ' .. enc(detail or ''))
  if n > HISTORY_MAX then redis.call('LTRIM', hk, -HISTORY_MAX, -1) end
  j.f.h = '1'
end
-- The owner of the shard re-reads the pending entries of these ids (their time moved, maybe
-- earlier than what it has loaded).
local function wake(id) redis.call('RPUSH', SHARD .. KEY.wake, id) end
-- repend(key, id, j): the job j (delay now) written, its pending entry moved to entry_at(j) and
-- the shard's owner woken; mv marks the move for the console's walks.
local function repend(key, id, j)
  j.f.mv = stamp
  write(key, j, 0)
  pend(id, j)
  wake(id)
end
-- counts: business -> state -> change in this call; its hash field "<business>|<state>" is only
-- built when flush() writes it (bump() is called once or twice per job).
local counts = {}
local function bump(biz, st, n)
  if biz == '-' then return end
  local c = counts[biz]
  if not c then
    c = {}
    counts[biz] = c
  end
  c[st] = (c[st] or 0) + n
end
local function flush()
  wflush()
  -- pcall: counters are for dashboards (and for starting waiting indexes, which a count that
  -- cannot be read does not do); a broken counters key must not fail the jobs' call after their
  -- writes are done (a script's writes are not rolled back on error).
  local after = {}  -- "<business>|<state>" -> the count after this call (nil: not known)
  for biz, by_state in pairs(counts) do
    for st, n in pairs(by_state) do
      if n ~= 0 then
        local k = biz .. '|' .. st
        local c = redis.pcall('HINCRBY', KEYS[2], k, n)
        if type(c) == 'number' then after[k] = c end
      end
    end
  end
  -- The waiting indexes this call read the mark of (see wadd() above).
  for biz, m in pairs(wmark) do
    local k = biz .. '|delay'
    local delta = counts[biz] and counts[biz].delay or 0
    local n = after[k]
    if delta == 0 and m == 'new' then
      local v = redis.pcall('HGET', KEYS[2], k)
      n = type(v) ~= 'table' and (tonumber(v) or 0) or nil
    end
    local mark = m
    if m == 'new' then
      mark = (n and n - delta == 0) and 'on' or 'off'
    elseif m == 'off' and delta ~= 0 and n == 0 then
      mark = 'on'
    end
    if mark == 'on' and wadded[biz] and redis.call('ZCARD', wkey(biz)) > WAITING_MAX then mark = 'off' end
    if mark ~= m then
      redis.call('HSET', WAITING, biz, mark)
      if m == 'off' or mark == 'off' then redis.call('DEL', wkey(biz)) end
    end
  end
  if size_delta ~= 0 then redis.call('INCRBY', SIZE, size_delta) end
  -- An entry older than the retention names a record that has expired (or will now); the
  -- index itself expires a retention after its last entry (an idle shard keeps none).
  if retention > 0 then
    for st in pairs(indexed) do
      redis.call('ZREMRANGEBYSCORE', state_key(st), '-inf', '(' .. string.format('%.0f', now - retention * 1000))
      redis.call('EXPIRE', state_key(st), retention)
    end
  end
end
-- read(key) -> the job's record (false: none), or nil and the error: from the shard's hash,
-- else from its key (a settled job's, or 0.3's delay record); where[] says which.
local function read(key)
  local id = id_of(key)
  local v = redis.pcall('HGET', JOBS, id)
  if type(v) == 'table' and v.err then return nil, v.err end
  if v then
    where[id] = 'hash'
    return v
  end
  v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return nil, v.err end
  where[id] = v and 'key' or 'none'
  return v
end
-- The header line only (for transitions that drop or keep the payload untouched): a record in
-- the hash whole (a field cannot be read in part), one in a key by its first 64 bytes (a
-- pending job's line is about 30), or whole if its line is longer.
local function read_head(key)
  local id = id_of(key)
  local v = redis.pcall('HGET', JOBS, id)
  if type(v) == 'table' and v.err then return nil, v.err end
  if v then
    where[id] = 'hash'
    if v == '' then return false end
    return v
  end
  v = redis.pcall('GETRANGE', key, 0, 63)
  if type(v) == 'table' and v.err then return nil, v.err end
  -- GETRANGE answers '' for a missing key as for an empty record: neither has a record to read,
  -- and where[] does not know which (so a write deletes the key).
  where[id] = v ~= '' and 'key' or nil
  if v == '' then return false end
  if #v == 64 and not string.find(v, '\n', 1, true) then return read(key) end
  return v
end
-- to_hash(key, id): a delay record read from its key (0.3 kept every record in one) moved into
-- the shard's hash, where a delay record belongs.
local function to_hash(key, id)
  local v = redis.call('GET', key)
  if v then redis.call('HSET', JOBS, id, v) end
  redis.call('DEL', key)
  where[id] = 'hash'
end
-- migrate(n) -> how many entries of the set of 0.3 (OLD_SET) are left after moving up to n of
-- them, the earliest first, into leaves. Its scores are the truth: a record that does not
-- name its entry's time (a ready or running job's ack deadline, a retry's time, written before
-- nb held them) is given it as nb, so that every entry can be found from its record after. A
-- delay job's record, a key in 0.3, moves into the shard's hash on the way (key_schema.hpp).
local function migrate(n)
  local got = redis.call('ZRANGE', OLD_SET, 0, n - 1, 'WITHSCORES')
  for k = 1, #got, 2 do
    local id, score = got[k], math.ceil(tonumber(got[k + 1]))
    local key = job_key(id)
    local j = parse((read_head(key)))
    if j and ((j.st == 'delay' and entry_at(j) ~= score and score > j.at) or
              ((j.st == 'ready' or j.st == 'running') and ms(j.f.nb) ~= score)) then
      local whole = parse(read(key), true)
      whole.f.nb = string.format('%.0f', score)
      write(key, whole, 0)
    elseif j and j.st == 'delay' and where[id] == 'key' then
      to_hash(key, id)
    end
    entry_put(id, score)
  end
  if #got > 0 then redis.call('ZREMRANGEBYRANK', OLD_SET, 0, #got / 2 - 1) end
  return redis.call('ZCARD', OLD_SET)
end
-- A job in flight (claimed, its record maybe on its way) has an entry in the shard's in-flight
-- hash, "<attempt> <firing_at> <epoch>" (the claiming owner's fence; older entries lack it), and
-- its record is not rewritten by the claim (the payload is read in Lua, never written again).
-- flight_of(e) -> attempt, firing_at, epoch ('' when absent) of an in-flight entry's value, or
-- nil (no entry: e nil or false; or not one).
local function flight_of(e)
  if not e then return nil end
  local att, at, epoch = string.match(e, '^(%d+) (%d+) ?(%d*)$')
  return tonumber(att), at, epoch
end
-- in_flight(id) -> the same for the job's entry.
local function in_flight(id) return flight_of(redis.call('HGET', KEYS[4], id)) end
-- The whole call is refused unless the caller holds the shard's current fence (or none is
-- asked for: fence '').
local function check_fence()
  if fence == '' then return nil end
  local owner = redis.call('GET', KEYS[5])
  if not owner or string.match(owner, '^(%d+)') ~= fence then
    return redis.error_reply('FENCED ' .. (owner or 'no owner') .. ' (caller holds epoch ' .. fence .. ')')
  end
  return nil
end
local my_epoch = fence ~= '' and fence or '0' 
-- Finishes a job that was delay: the payload goes (it is on its topic by now) unless
-- keep_payload, the record expires after the retention, the pending entry is removed. `detail`:
-- a history line is written for a failure always, for the other ends when the job has a
-- history already. `att`: the attempt in the job's in-flight entry as the caller read it
-- (in_flight()), false when it has none, nil when the caller did not read it (read here): the
-- entry is removed and the record takes its attempt.
local function finish(key, id, j, st, field, extra_fields, detail, keep_payload, att)
  if att == nil then att = in_flight(id) end
  if att then
    j.att = att
    redis.call('HDEL', KEYS[4], id)
  end
  j.st = st
  if not keep_payload then j.payload = nil end
  j.f.last_error = nil
  j.f.nb = nil
  j.f.dead = nil
  j.f[field] = stamp
  for k, v in pairs(extra_fields or {}) do j.f[k] = v end
  if st == 'failed' or (st == 'cancelled' and j.f.h) then
    -- A failure whose reason starts "expired:" (max-lateness-ms, or a repeat with nothing left
    -- after a missed occurrence) is an expiry in the history.
    local event = st ~= 'failed' and st or (string.sub(detail or '', 1, 8) == 'expired:' and 'expired' or 'dead')
    hist(key, j, event, detail)
  end
  write(key, j, retention)
  entry_move(id, j)
  bump(j.biz, 'delay', -1)
  bump(j.biz, st, 1)
end
-- delivered(key, id, j, keep, ack, max_att, nxt, nrep, skip): settles a delay job whose ready
-- record Kafka acknowledged (mark_ready.lua, mark_delivered.lua): a repeating job goes back to
-- delay at its next occurrence; otherwise it becomes ready, its payload kept (keep) or dropped;
-- kept with ack > 0, its pending entry waits at the ack deadline. Returns {changed, state, at}.
-- A repeat's next occurrence is the caller's (broker/repeat_plan.hpp, with the catch-up
-- policy): nxt its time and nrep its number, '-' when the series ends; '' when the caller did
-- not say: an interval then goes to the latest point of its grid that has passed (or the next
-- one), a calendar series ends (Lua cannot compute it). skip: the occurrence was not delivered
-- but missed (repeat-catchup): its attempt is not counted, and a series with nothing left
-- ends failed. att: as finish()'s.
local function delivered(key, id, j, keep, ack, max_att, nxt, nrep, skip, att)
  if att == nil then att = in_flight(id) end
  if att then
    if not skip then j.att = att end
    redis.call('HDEL', KEYS[4], id)
  end
  j.f.nb = nil
  j.f.last_error = nil
  if not skip then j.f.ready_at = stamp end
  local every = tonumber(j.f.every)
  if repeats(j) then
    local rep, count = tonumber(j.f.rep) or 1, tonumber(j.f.count) or 0
    local was = string.format('%.0f', j.at)
    if skip then
      hist(key, j, 'skipped', 'occurrence ' .. rep .. ' due at ' .. was .. ' missed')
    else
      hist(key, j, 'delivered', 'occurrence ' .. rep)
    end
    if j.f.stop then  -- cancelled while this occurrence was in flight: the series ends here
      j.f.stop = nil
      finish(key, id, j, 'cancelled', 'cancelled_at', nil, nil, nil, false)
      return {1, 'cancelled', '0'}
    end
    local at_next, rep_next
    if nxt ~= '' and nxt ~= '-' then
      at_next, rep_next = tonumber(nxt), tonumber(nrep)
    elseif nxt == '' and every then
      -- The grid deliver_at + k * every (no drift): the latest instant of it that has passed
      -- by now, or the next one if none has.
      local steps = math.max(1, math.floor((now - j.at) / every))
      at_next, rep_next = j.at + steps * every, rep + steps
    end
    local until_ = tonumber(j.f['until'])
    if at_next and (count == 0 or rep_next <= count) and not (until_ and at_next > until_) then
      -- cc: missed occurrences delivered in a row (repeat-catchup all stops at its bound).
      if not skip and at_next <= now then
        j.f.cc = tostring((tonumber(j.f.cc) or 0) + 1)
      else
        j.f.cc = nil
      end
      j.at = at_next
      j.f.rep = string.format('%.0f', rep_next)
      j.att = 0
      j.f.mv = stamp
      hist(key, j, 'repeat', 'occurrence ' .. j.f.rep .. ' at ' .. string.format('%.0f', j.at))
      write(key, j, 0)
      pend(id, j)
      bump(j.biz, skip and 'skipped' or 'repeated', 1)
      return {1, 'delay', string.format('%.0f', j.at)}
    end
    if skip then
      local why = 'expired: occurrence ' .. rep .. ' due at ' .. was .. ' was missed and none is left'
      finish(key, id, j, 'failed', 'failed_at', {error = enc(why)}, why, nil, false)
      return {1, 'failed', '0'}
    end
  elseif keep or j.f.h then
    hist(key, j, 'delivered', '')
  end
  if not keep then
    finish(key, id, j, 'ready', 'ready_at', nil, nil, nil, false)
    return {1, 'ready', '0'}
  end
  j.st = 'ready'
  bump(j.biz, 'delay', -1)
  bump(j.biz, 'ready', 1)
  if ack > 0 then
    j.f.nb = string.format('%.0f', now + ack)  -- the ack deadline, where the entry waits
    entry_move(id, j)
    if max_att > 0 then j.f.ma = tostring(max_att) end
    write(key, j, 0)
    return {1, 'ready', j.f.nb}
  end
  entry_move(id, j)
  write(key, j, retention)
  return {1, 'ready', '0'}
end
-- settles(att, attempt) -> whether a mark of `attempt` (the claim's; 0: not known) settles a job
-- whose in-flight entry names attempt `att` (nil: none). A mark settles the claim it is about
-- and nothing else. Sent again because its answer was lost (Redis closed the connection after
-- running it), it meets a job that has moved on: reported failed and waiting for its retry, a
-- repeat at its next occurrence, claimed again with the next attempt. Settling that would end
-- the job without the delivery it waits for (it once did: the retry was lost). An entry lost
-- with Redis's last second (appendfsync everysec) leaves the job delay, to be claimed and
-- delivered again: a duplicate, never a loss.
local function settles(att, attempt)
  return att ~= nil and (attempt == 0 or att == attempt)
end
-- The slow way of settling a delivered job: its whole record read; a job still delay is settled
-- only if its in-flight entry names `attempt` (settles()), and otherwise answers where its
-- pending entry waits (the caller holds it there: the call that moved it on may have been this
-- mark, whose answer was lost with the news of the next occurrence); a job neither delay, ready
-- nor running only loses a stale pending entry, looked for at `hint` (the deliver_at the claim
-- handed out).
local function settle_read(key, id, attempt, keep, ack, max_att, nxt, nrep, skip, hint)
  local v = read(key)
  local j = parse(v, true)
  if j and j.st == 'delay' then
    local att = in_flight(id)
    if settles(att, attempt) then
      return delivered(key, id, j, keep, ack, max_att, nxt or '', nrep, skip, att)
    end
    return {0, 'delay', string.format('%.0f', entry_at(j))}
  end
  if j and j.st ~= 'ready' and j.st ~= 'running' then entry_drop(id, hint) end
  return {0, j and j.st or (v and 'corrupt' or 'missing'), '0'}
end
local out = {}
