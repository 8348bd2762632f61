-- browse: one page of one shard's jobs for the console (GET /jobs: storage/job_browse.hpp), run
-- after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp; ARGV[3] unused). Not fenced, and it
-- writes nothing. No jobs' keys and no stride: its own arguments follow the fixed four.
--   ARGV[5]        the state walked: 'delay' walks the pending set (its leaves) by due time,
--                  earliest first, or with a business the business's waiting index where the
--                  shard keeps one or has never held a job of it (prelude.lua, wadd(): the
--                  same scores, so a cursor of one walk is good in the other); any other state walks its state index
--                  (key_schema.hpp), newest first
--   ARGV[6]        the walk's start (epoch ms): a delay job whose entry moved since (its mv) is
--                  left out; so a walk never lists a job twice (a state walk's range ends there)
--   ARGV[7..9]     where to start: score and job-id ('' for the start of the range), then '1'
--                  to include that entry, '0' to start after it
--   ARGV[10..11]   the scores walked, lo and hi (integers; a state walk starts at hi)
--   ARGV[12..13]   matches wanted at most, entries looked at at most (each costs one GETRANGE)
--   ARGV[14..16]   business, job-id prefix, text the error holds in lower case ('': any)
--   ARGV[17..18]   deliver_at range of the record ('': open)
-- Returns {matches, last, done, examined}: each match {id, state, deliver_at, attempt,
-- business, error (percent-encoded, '' none), score, in_flight ('1' or '')}; last {score, id}
-- of the last entry looked at ({} if none); done 1 when the range holds nothing after it.
local st, t0 = ARGV[5], tonumber(ARGV[6])
local from_score, from_id, inclusive = ARGV[7], ARGV[8], ARGV[9] == '1'
local lo, hi = tonumber(ARGV[10]), tonumber(ARGV[11])
local want, budget = tonumber(ARGV[12]), tonumber(ARGV[13])
local biz, prefix, text = ARGV[14], ARGV[15], ARGV[16]
local at_from, at_to = tonumber(ARGV[17]), tonumber(ARGV[18])
-- key: the sorted set walked, or nil for the pending set's leaves (prelude_pending.lua).
local key = st ~= 'delay' and state_key(st) or nil
if st == 'delay' and biz ~= '' then
  -- No mark and no waiting job of the business counted: the shard has never held one (its
  -- index, empty, is complete).
  local m = redis.call('HGET', WAITING, biz)
  local n = not m and redis.pcall('HGET', KEYS[2], biz .. '|delay')
  if m == 'on' or (not m and type(n) ~= 'table' and (tonumber(n) or 0) <= 0) then key = wkey(biz) end
end
local desc = st ~= 'delay'
local function dec(s) return (string.gsub(s, '%%(%x%x)', function(h) return string.char(tonumber(h, 16)) end)) end
-- The rank (in walk order) of the first entry of `set` to look at: the first at or after the
-- start (ARGV[7..10]).
local function first_rank(set)
  if from_id == '' then
    if desc then return redis.call('ZCOUNT', set, '(' .. ARGV[11], '+inf') end
    return redis.call('ZCOUNT', set, '-inf', '(' .. ARGV[10])
  end
  local s = redis.call('ZSCORE', set, from_id)
  if s and tonumber(s) == tonumber(from_score) then
    local r = desc and redis.call('ZREVRANK', set, from_id) or redis.call('ZRANK', set, from_id)
    return inclusive and r or r + 1
  end
  -- Not here at that score (the position is another shard's, or the entry moved): the ranks of
  -- the entries tied at from_score are lo..hi-1, ordered by id (Redis's byte order, reversed
  -- when walking newest first); a binary search finds the first that comes after from_id, in
  -- O(log ties) reads, however many jobs share one millisecond.
  local lo, hi
  if desc then
    lo, hi = redis.call('ZCOUNT', set, '(' .. from_score, '+inf'), redis.call('ZCOUNT', set, from_score, '+inf')
  else
    lo, hi = redis.call('ZCOUNT', set, '-inf', '(' .. from_score), redis.call('ZCOUNT', set, '-inf', from_score)
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = (desc and redis.call('ZREVRANGE', set, mid, mid) or redis.call('ZRANGE', set, mid, mid))[1]
    if (desc and bytes_less(from_id, m)) or (not desc and bytes_less(m, from_id)) then lo = mid + 1 else hi = mid end
  end
  return lo
end
-- next_batch(n) -> {id, score, ...}: the walk's next n entries at most ({} at its end).
local next_batch
if key then
  local rank = first_rank(key)
  next_batch = function(n)
    local got = desc and redis.call('ZREVRANGE', key, rank, rank + n - 1, 'WITHSCORES')
                      or redis.call('ZRANGE', key, rank, rank + n - 1, 'WITHSCORES')
    rank = rank + #got / 2
    return got
  end
else
  -- The leaves, from the one whose range holds the start (in the first window at or after the
  -- start's), at the start's rank in it; then the leaves after, window after window.
  local at = from_id == '' and lo or tonumber(from_score)
  local n, leaf = first_window(window_of(at)), nil
  if n then
    use_window(n)
    leaf = leaf_at(entry_key(at, from_id)) or first_leaf()
  end
  local rank = leaf and first_rank(LEAF .. leaf) or 0
  next_batch = function(count)
    while leaf do
      local got = redis.call('ZRANGE', LEAF .. leaf, rank, rank + count - 1, 'WITHSCORES')
      if #got > 0 then
        rank = rank + #got / 2
        return got
      end
      leaf, rank = next_leaf(leaf), 0
      if not leaf then
        n = next_window(n)
        if n then
          use_window(n)
          leaf = first_leaf()
        end
      end
    end
    return {}
  end
end
local matches, last, examined, done = {}, {}, 0, 0
while #matches < want and examined < budget and done == 0 do
  local got = next_batch(math.min(100, budget - examined))
  if #got == 0 then done = 1 end
  for k = 1, #got, 2 do
    local id, score = got[k], tonumber(got[k + 1])
    if (desc and score < lo) or (not desc and score > hi) then
      done = 1
      break
    end
    examined = examined + 1
    last = {got[k + 1], id}
    if prefix == '' or string.sub(id, 1, #prefix) == prefix then
      local j = parse((read_head(job_key(id))))
      if j and j.st == st and (biz == '' or j.biz == biz) and (not at_from or j.at >= at_from) and
         (not at_to or j.at <= at_to) and (not desc or score <= t0) and (desc or (tonumber(j.f.mv) or 0) <= t0) then
        local e = j.f.error or j.f.last_error or ''
        if text == '' or string.find(string.lower(dec(e)), text, 1, true) then
          matches[#matches + 1] = {id, j.st, string.format('%.0f', j.at), tostring(j.att), j.biz, e, got[k + 1],
                                   (not desc and in_flight(id)) and '1' or ''}
        end
      end
    end
    if #matches >= want or examined >= budget then break end
  end
end
return {matches, last, done, examined}
