-- pending: reads of one shard's pending set for job_store.cpp (the loader's range, the due
-- counts, the stats), run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp; ARGV[3]
-- unused). Not fenced. The set's layout is prelude_pending.lua's (entries_*): no C++ reads it directly.
--   ARGV[5] 'between'  ARGV[6] after ('': from the start), ARGV[7] upto, ARGV[8] limit (0: no
--                      limit) -> {left, {id, score, id, score, ...}}: the entries with after <
--                      score <= upto, ascending (ties in job-id order), at most limit. It first
--                      moves up to MIGRATE_CHUNK entries of the set of 0.3 into leaves (and
--                      their delay records into the shard's hash)
--                      (migrate()); left > 0: that many are still there, and no entries are
--                      read (the caller asks again)
--   ARGV[5] 'count'    ARGV[6] ascending bounds "b1 b2 ..." (integers, space-separated) ->
--                      {n1, n2, ...}: the entries with score in (b[k-1], b[k]] ((-inf, b1] first)
--   ARGV[5] 'size'     -> {entries, the earliest entry's score ('' when none)}
-- Only 'between' writes (the move from 0.3): the loader calls it first, when it takes a shard.
-- About 9 us of Redis per entry moved (a record's line read, a delay record moved from its key
-- into the shard's hash, the entry put), so a call blocks Redis for about 4.5 ms (200 000
-- entries of 0.3 with 200-byte values: 400 calls, 4.5 ms each, 1.8 s in all, 2026-11-29).
local MIGRATE_CHUNK = 500
local what = ARGV[5]
if what == 'between' then
  local left = migrate(MIGRATE_CHUNK)
  if left > 0 then
    flush()
    return {left, {}}
  end
  local got = entries_between(tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]) or 0)
  flush()
  return {0, got}
elseif what == 'count' then
  local bounds = {}
  for b in string.gmatch(ARGV[6], '%S+') do bounds[#bounds + 1] = tonumber(b) end
  return entries_count(bounds)
elseif what == 'size' then
  local first = entries_first()
  return {entries_size(), first and string.format('%.0f', first) or ''}
end
return redis.error_reply('pending.lua: unknown read ' .. tostring(what))
