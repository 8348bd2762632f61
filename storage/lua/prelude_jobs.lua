-- The prelude's third part (prelude.lua says how the parts join): a record's write, its history,
-- the counts and flush(), reads, the shard's fence, and settling a delivered job. It uses the
-- record and indexes of prelude.lua and the pending set of prelude_pending.lua.
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
  local n = redis.call('RPUSH', hk, stamp .. ' ' .. event .. ' ' .. tostring(j.att) .. ' ' .. enc(detail or ''))
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
local counts  -- per call (begin())
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
        local c = redis.pcall('HINCRBY', COUNTERS, k, n)
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
      local v = redis.pcall('HGET', COUNTERS, k)
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
local function in_flight(id) return flight_of(redis.call('HGET', FLIGHT, id)) end
-- The whole call is refused unless the caller holds the shard's current fence (or none is
-- asked for: fence '').
local function check_fence()
  if fence == '' then return nil end
  local owner = redis.call('GET', OWNER)
  if not owner or string.match(owner, '^(%d+)') ~= fence then
    return redis.error_reply('FENCED ' .. (owner or 'no owner') .. ' (caller holds epoch ' .. fence .. ')')
  end
  return nil
end
-- The epoch a claim writes in the in-flight entry (per call: begin()).
local my_epoch
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
    redis.call('HDEL', FLIGHT, id)
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
    redis.call('HDEL', FLIGHT, id)
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
-- The script's reply, one group per job (per call: begin()).
local out
-- begin(keys, argv): every part's state for a call with these KEYS and ARGV, before the script's
-- body runs. As EVAL (the prelude and the body one chunk, compiled once and run at each call) a
-- script calls it first; as a function of delayd's library (FUNCTION LOAD: the prelude run once,
-- each body a function of it, lua_scripts.hpp) so does each function, and nothing of an earlier
-- call is seen. A local of the prelude that holds something of one call is set here and nowhere
-- else but by the helpers during the call.
local function begin(keys, argv)
  begin_record(keys, argv)
  begin_pending(keys)
  counts, my_epoch, out = {}, fence ~= '' and fence or '0', {}
end
