-- claim: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 3: job-id, the score the loader read its pending entry at ('' unknown), a delivery the
-- caller knows is in Kafka ('' none; '<attempt>', or '<attempt>/<occurrence>' for a repeat: a
-- takeover found it in the shard's delivery log). ARGV[3]
-- ahead_ms. Fenced. Takes jobs due by now + ahead_ms for delivery: counts the
-- attempt and stamps firing_at in the in-flight hash, which from here on makes a cancel answer
-- "in_flight" (the record may already be on its way, or held by the broker until its
-- deliver_at). A job whose deliver_at is after now + ahead_ms is left alone ('early'); the
-- broker never produces a record before its deliver_at by the wall clock (ahead_ms only lets
-- it claim in advance). The caller reads the claimed records (HMGET of the shard's hash of
-- delay records, where a claimed record always is) right after the call, in the same round
-- trip, for the payload.
-- What cannot be delivered is set aside in the same call: a stale entry (job finished) is
-- removed; a corrupt record is kept for people as the payload of a record marked failed with
-- error "corrupt job record: ..."; an entry with no readable record (none, or not a string)
-- is moved to the quarantine hash with the reason.
-- The lifecycle (docs/consuming.md, "Job lifecycle"): a job is not due before its not-before time (nb, a
-- retry after a failed report); a ready or running job whose ack deadline (its nb, where its
-- pending entry waits) passed is delivered again, as delay, with its kept payload, its entry
-- and nb left at that deadline, or, out of attempts (ma), goes round once more marked dead for
-- its dead letter.
-- Per job: {'deliver', deliver_at, business, attempt} for a plain job, or for any other
-- {'deliver', deliver_at, business, attempt, repeat, 0, not_before, redelivery 0|1, dead reason,
-- ml, every, cron, tz, until, count, cu, cc} (ml: max-lateness-ms; the last seven: the repeat
-- rule's fields; '' when absent; RepeatRule in repeat_rule.hpp, read by job_store.cpp's
-- parse_claim());
-- {'early', due}, {'finished', state}, {'corrupt', reason, business} or {'unreadable',
-- reason[, why kept]}: the third value when the quarantine hash could not be written, so the
-- entry was kept.
local function rule_of(j)
  return j.f.every or '', j.f.cron or '', j.f.tz or '', j.f['until'] or '', j.f.count or '', j.f.cu or '', j.f.cc or ''
end
local refused = check_fence()
if refused then return refused end
-- The reads are done for the whole batch at once (one HMGET of the records in the shard's hash
-- of delay records, one HMGET of the in-flight entries) and the in-flight entries written at the
-- end in one HSET, so that Redis spends its time on the jobs, not on calls from Lua. A record
-- the hash did not return (a ready or running job's, 0.3's, none, or an unreadable hash) is read
-- again alone (read_head(): its key), for its state or its reason. A batch that names a job
-- twice is done job by job instead, as the second must see what the first wrote.
local records, flying, hset = {}, {}, {}
local twice = false
do
  local seen, ids = {}, {}
  for i = FIRST, #KEYS do
    local a = 5 + (i - FIRST) * 3
    local id = ARGV[a]
    twice = twice or seen[id] ~= nil
    seen[id] = true
    ids[#ids + 1] = id
  end
  if #ids > 0 then
    records = redis.pcall('HMGET', JOBS, unpack(ids))  -- an error: each job's read_head() gives it
    if records.err then records = {} end
    if not twice then flying = redis.call('HMGET', KEYS[4], unpack(ids)) end
  end
end
-- What follows the attempt in every in-flight entry this call writes.
local flown = ' ' .. stamp .. ' ' .. my_epoch
-- The attempt in the job's in-flight entry (the k-th of the batch), or nil.
local function attempt_in_flight(k, id)
  if twice then return (in_flight(id)) end
  return (flight_of(flying[k]))
end
-- The job's in-flight entry is `v` (written before the call returns).
local function fly(id, v)
  if twice then
    redis.call('HSET', KEYS[4], id, v)
  else
    hset[#hset + 1] = id
    hset[#hset + 1] = v
  end
end
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 3
  local id, seen_at = ARGV[a], tonumber(ARGV[a + 1])
  local known_att, known_rep = string.match(ARGV[a + 2], '^(%d+)/?(%d*)$')
  local known, known_occ = tonumber(known_att), tonumber(known_rep) or 0
  local v, err = records[i - FIRST + 1], nil
  if v and v ~= '' then where[id] = 'hash' else v, err = read_head(KEYS[i]) end
  local j = parse(v)
  -- A delivered job's pending entry: its ack deadline, if its business has one (read once).
  local waiting = j and (j.st == 'ready' or j.st == 'running') and entry_find(id, j.e0 or seen_at)
  if err or not v then
    local why = err and ('job record unreadable: ' .. string.sub(err, 1, 200)) or 'no job record for this pending entry'
    local q = redis.pcall('HSET', KEYS[3], id, why)
    if type(q) == 'table' and q.err then
      out[#out + 1] = {'unreadable', why, 'kept: quarantine hash unwritable: ' .. string.sub(q.err, 1, 200)}
    else
      entry_drop(id, seen_at)
      out[#out + 1] = {'unreadable', why}
    end
  elseif not j then
    local whole = read(KEYS[i])
    local why = "corrupt job record: header line unreadable: '" .. string.sub(string.match(whole, '^[^\n]*'), 1, 64) .. "'"
    write(KEYS[i], {st = 'failed', at = 0, att = 0, biz = '-', f = {failed_at = stamp, error = enc(why)}, payload = whole}, retention)
    entry_drop(id, seen_at)
    redis.call('HDEL', KEYS[4], id)
    out[#out + 1] = {'corrupt', why, '-'}
  elseif waiting then
    -- Delivered and waiting for a report until its ack deadline (the entry's score): once that
    -- passed, it goes round again, as delay, with its kept payload.
    local due = waiting
    local whole = due <= now + extra and parse(read(KEYS[i]), true)
    if due > now + extra then
      out[#out + 1] = {'early', string.format('%.0f', due)}
    elseif not whole or not whole.payload or whole.payload == '' then
      entry_drop(id, due)  -- nothing to deliver again: it waits for its report only
      if whole then  -- and its record says so (no deadline), and expires as a settled one does
        whole.f.nb = nil
        write(KEYS[i], whole, retention)
      end
      out[#out + 1] = {'finished', j.st}
    else
      -- ma: the business's max_process_attempts when it became ready. Out of them, it goes
      -- round once more only to be dead-lettered (no attempt added, not a redelivery).
      local out_of_attempts = whole.att >= (tonumber(whole.f.ma) or math.huge)
      bump(whole.biz, whole.st, -1)
      bump(whole.biz, 'delay', 1)
      whole.st = 'delay'
      local att = whole.att
      if out_of_attempts then
        whole.f.dead = enc('no report within the ack timeout after ' .. att .. ' deliveries')
      else
        att = att + 1
        bump(whole.biz, 'redelivered', 1)
        whole.f.rd = tostring((tonumber(whole.f.rd) or 0) + 1)
        hist(KEYS[i], whole, 'redelivered', 'no report within the ack timeout')
      end
      whole.f.nb = string.format('%.0f', due)  -- its pending entry stays at the deadline that passed
      write(KEYS[i], whole, 0)
      wadd(id, whole.biz, due)
      fly(id, att .. flown)
      out[#out + 1] = {'deliver', string.format('%.0f', whole.at), whole.biz, att, whole.f.rep or '0', 0,
                       string.format('%.0f', due), 1, whole.f.dead or '', whole.f.ml or '', rule_of(whole)}
    end
  elseif j.st ~= 'delay' then
    entry_drop(id, j.e0 or seen_at)
    redis.call('HDEL', KEYS[4], id)
    out[#out + 1] = {'finished', j.st}
  else
    -- nb: not before (a retry after a failed report waits for its time, not only deliver_at).
    local due = entry_at(j)
    if due > now + extra then
      out[#out + 1] = {'early', string.format('%.0f', due)}
    else
      -- A job marked dead goes to the dead-letter topic, not to a consumer: no attempt is added.
      -- Nor is one for the attempt in flight that the caller knows was delivered (its record is
      -- in Kafka; the caller settles it without producing it again): the same attempt and, for a
      -- repeat, the same occurrence (each occurrence is attempt 1).
      local flying_att = attempt_in_flight(i - FIRST + 1, id)
      local logged = known and flying_att == known and (tonumber(j.f.rep) or 0) == known_occ
      local att = (flying_att or j.att) + ((j.f.dead or logged) and 0 or 1)
      fly(id, att .. flown)
      -- The caller reads the claimed records from the hash (job_store.cpp): one of 0.3 moves there.
      if where[id] == 'key' then to_hash(KEYS[i], id) end
      if repeats(j) or j.f.h or j.f.rd or j.f.dead or j.f.nb or j.f.vo or j.f.ml then
        out[#out + 1] = {'deliver', string.format('%.0f', j.at), j.biz, att, j.f.rep or '0', 0,
                         string.format('%.0f', due), 0, j.f.dead or '', j.f.ml or '', rule_of(j)}
      else  -- a plain job: the short form (the common case, kept cheap)
        out[#out + 1] = {'deliver', string.format('%.0f', j.at), j.biz, att}
      end
    end
  end
end
if #hset > 0 then redis.call('HSET', KEYS[4], unpack(hset)) end
flush()
return out
