-- mark_ready: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 4: job-id, deliver_at, attempt, business (as the claim handed them out; business ''
-- when the caller does not know them). ARGV[3] unused. Not fenced (see FENCING in lua_scripts.hpp). After
-- Kafka acknowledged each job's ready record, for plain jobs (Claim::plain: no repeat, no
-- history) of businesses that keep no payload: the common case, kept cheap. A job whose
-- in-flight entry names the attempt (so it was claimed for this delivery and is still delay:
-- nothing else removes the entry without settling the job) loses the entry and gets the
-- finished record written from the arguments, without reading the old one. Otherwise (a caller
-- that does not know the fields, or no such entry) the record is read and settled, and only if
-- it is still the claim of this attempt in flight (settle_read(), prelude's settles(): a mark
-- sent again after its answer was lost changes nothing).
-- Per job: {changed, state, at}: at is the next occurrence (state delay), the ack deadline
-- (ready), or 0. A job already final only loses its (stale) pending entry; a ready or running
-- one keeps its ack deadline.
-- The fast path's bookkeeping is done for the whole batch at once (one HMGET, HDEL, ZREM and
-- ZADD for all its jobs, one HDEL of their records from the shard's hash of delay records, and
-- one ZREM per business from the waiting indexes, so that Redis spends its time on the jobs,
-- not on calls from Lua); only the record's SET (a key now: the job is no longer delay) is per
-- job. The waiting-index removes noted so far are written before a job takes the per-job path. A job-id seen earlier in the same batch takes
-- the per-job path, after that earlier one, as if each job were marked in turn.
local fast, probe, seen = {}, {}, {}
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 4
  local id = ARGV[a]
  if ARGV[a + 3] ~= '' and not seen[id] then probe[#probe + 1] = i end
  seen[id] = true
end
if #probe > 0 then
  local ids = {}
  for k, i in ipairs(probe) do ids[k] = ARGV[5 + (i - FIRST) * 4] end
  local flying = redis.call('HMGET', KEYS[4], unpack(ids))
  local gone, at = {}, {}
  for k, i in ipairs(probe) do
    if settles(flight_of(flying[k]), tonumber(ARGV[5 + (i - FIRST) * 4 + 2]) or 0) then
      fast[i] = true
      gone[#gone + 1] = ids[k]
      at[#at + 1] = tonumber(ARGV[5 + (i - FIRST) * 4 + 1])  -- a plain job's entry: its deliver_at
    end
  end
  if #gone > 0 then
    redis.call('HDEL', KEYS[4], unpack(gone))
    redis.call('HDEL', JOBS, unpack(gone))  -- their records become keys below
    entries_drop(gone, at)
    enter_all(gone, 'ready')
  end
end
-- The fast way's reply: one table for every job (the reply is only read).
local READY = {1, 'ready', '0'}
local tail = ' ready_at=' .. stamp .. '\n'
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 4
  local id, biz = ARGV[a], ARGV[a + 3]
  if fast[i] then
    local v = 'ready ' .. ARGV[a + 1] .. ' ' .. ARGV[a + 2] .. ' ' .. biz .. tail
    if retention > 0 then redis.call('SET', KEYS[i], v, 'EX', retention) else redis.call('SET', KEYS[i], v) end
    wdel_later(id, biz)
    bump(biz, 'delay', -1)
    bump(biz, 'ready', 1)
    out[#out + 1] = READY
  else
    wflush()
    -- The header line first: a plain job still delay, claimed for this attempt, is finished
    -- from it, as above.
    local attempt = tonumber(ARGV[a + 2]) or 0
    local j = parse((read_head(KEYS[i])))
    local att = j and j.st == 'delay' and not (repeats(j) or j.f.h) and in_flight(id)
    if att and settles(att, attempt) then
      finish(KEYS[i], id, j, 'ready', 'ready_at', nil, nil, nil, att)
      out[#out + 1] = {1, 'ready', '0'}
    else
      out[#out + 1] = settle_read(KEYS[i], id, attempt, false, 0, 0, nil, nil, nil, tonumber(ARGV[a + 1]))
    end
  end
end
flush()
return out
