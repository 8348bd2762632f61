-- The prelude: the shared helpers and locals of every batch script. The prelude is the record's
-- facts (written by record_lua_gen.cpp), this file, prelude_pending.lua, then prelude_jobs.lua:
-- storage/CMakeLists.txt joins them in that order, and lua_scripts.hpp documents the keys,
-- ARGV[1..4], fencing and the record. Each part uses what the parts before it define, never what
-- comes after (they are one Lua chunk: a local is seen from where it is defined on). A script's
-- own text runs after it, and after begin(KEYS, ARGV) (the end of prelude_jobs.lua), either in
-- the same chunk (EVAL) or as a function of the library the prelude starts (FUNCTION LOAD:
-- lua_scripts.hpp, "How Redis runs them"). So the prelude's top level runs once per library
-- load, not per call: whatever belongs to one call is a local set by begin().
--   prelude.lua          a job's keys, parse() of its record, the state and waiting indexes
--   prelude_pending.lua  the pending set in windows of leaves (the entry_* helpers, entry_move())
--   prelude_jobs.lua     write() of a record, its history, counts and flush(), read(), the
--                        shard's fence, and settling a delivered job
--
-- Shared helpers. parse(v) -> job table {st, st0, at, att, biz, biz0, f = {name = value}, payload}
-- or nil (st0 and biz0: the state and business as read, for the indexes), here. In
-- prelude_jobs.lua: write(key, job, ex) SETs the record, with EX ex when ex > 0, and moves the job
-- between the state indexes (and out of a waiting index) when its state or business changed;
-- enc() percent-encodes whitespace and '%' so that free text (an error) fits in one field;
-- bump() counts; flush() writes counts.
local FIRST = 6  -- KEYS index of the first job record; its arguments start at ARGV[5]
-- STATES, FIELDS (in the order write() puts them), AT_DIGITS and ATT_DIGITS come before this
-- text: the build writes them from storage/job_record.hpp, the one list C++ reads too; and
-- WAITING_MAX, LEAF_MAX, WINDOW_MS and KEY (what follows "<prefix>:{<shard>}" in the name of each key of
-- the shard a script builds), from key_schema.hpp.
-- The shard's key prefix "<prefix>:{<shard>}", from KEYS[1] ("<prefix>:{<shard>}:pending:windows";
-- the prefix and the shard hold no '}'): a job's history list and the shard's wake list live
-- beside its other keys, in the same hash slot.
-- Set for each call by begin_record() (at the end of this file), like every local of the prelude
-- that holds something of one call.
local SHARD
local now, retention, extra  -- ARGV[1..3] as numbers: now (epoch ms), the retention (s), its own
local stamp, fence  -- ARGV[1] as given (now, for records), ARGV[4]
local COUNTERS, FLIGHT, OWNER  -- KEYS[2], KEYS[4], KEYS[5]: the shard's counters, in-flight hash, owner
-- A job's record key from its id, and back.
local function job_key(id) return SHARD .. KEY.job .. id end
local function id_of(key) return string.sub(key, #SHARD + #KEY.job + 1) end
local function hist_key(key) return SHARD .. KEY.history .. id_of(key) end
-- The shard's hash of delay records (key_schema.hpp): a job's record is its field there while
-- the job is delay, and the string job_key(id) in any other state; never both.
local JOBS  -- SHARD .. KEY.jobs
-- where[id]: where this call last found or put the job's record, 'hash', 'key' or 'none' (nil:
-- not looked); write() deletes the record from the other place unless it knows it is not there.
local where
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
local indexed
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
local WAITING  -- SHARD .. KEY.waiting_marks
local function wkey(biz) return SHARD .. KEY.waiting .. biz end
local wmark, wadded  -- business -> 'on' | 'off' | 'new' (as read once); -> true if added to
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
local wlater  -- business -> {adds = {score, id, ...}, dels = {id, ...}}
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
-- begin_record(keys, argv): this part's state for a call with these KEYS and ARGV (prelude_jobs.lua's
-- begin() calls it before the script's body).
local function begin_record(keys, argv)
  SHARD = string.match(keys[1], '^[^}]*}')
  now, retention, extra = tonumber(argv[1]), tonumber(argv[2]), tonumber(argv[3])
  stamp, fence = argv[1], argv[4]
  COUNTERS, FLIGHT, OWNER = keys[2], keys[4], keys[5]
  JOBS = SHARD .. KEY.jobs
  where, indexed = {}, {}
  WAITING = SHARD .. KEY.waiting_marks
  wmark, wadded, wlater = {}, {}, {}
end
