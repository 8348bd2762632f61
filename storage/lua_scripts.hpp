// The Lua scripts that move jobs between states, a whole batch of one shard per call.
//
// Every script takes the same keys, all in the shard's hash slot (so one call is atomic on a
// single primary and legal under Redis Cluster):
//   KEYS[1] the shard's pending set, KEYS[2] its counters, KEYS[3] its quarantine hash,
//   KEYS[4] its in-flight hash, KEYS[5] its owner, KEYS[6..] one job record per job of the batch.
// and ARGV[1] now (epoch ms), ARGV[2] retention_s of finished jobs (0: kept for ever),
// ARGV[3] a script-specific number, ARGV[4] the caller's fence (below), then a fixed number of
// arguments per job (its "stride", given under each script), the first of which is always the
// job-id.
//
// FENCING. A broker that owns a shard holds its fence: the epoch it got from kTakeShard, which
// INCRs it in KEYS[5] ("<epoch> <member> <since_ms>") at every assignment, so a later owner
// always holds a larger one. The scripts that decide what gets produced, or that rewrite what
// the owner of the moment relies on, refuse the whole call (error "FENCED <owner>") unless
// ARGV[4] is the current epoch: claim, release (which re-scores) and mark_failed. So a broker
// whose shard moved on (revoked while it was busy, or paused past its session) produces nothing
// new and cannot undo the new owner's in-flight entry or fail a job the new owner delivers.
// The in-flight entry records the claiming epoch ("<attempt> <firing_at> <epoch>").
// Not fenced, on purpose: accept and cancel (they apply records of the ingest topic, which are
// facts whichever member reads them, and are idempotent), and mark_ready, which reports a fact
// too (Kafka acknowledged a ready record): refusing it would let the new owner's later cancel,
// failure or retry contradict a record that is in the ready topic. ARGV[4] = '' (tools and
// tests, which own no shard) skips the check.
// A call returns one group of values per job, in the order of KEYS[5..].
//
// A job record is one Redis string (key_schema.hpp gives the format): a header line
// "<state> <deliver_at> <attempt> <business>[ <name>=<value>]..." then "\n" then the payload.
// kPrelude parses and writes it; every script is kPrelude followed by its body. A record that
// does not parse is "corrupt": the script that meets it says so, and claim sets it aside.
// Counters ("<business>|<state>" in KEYS[2]) are bumped once per batch and business.
//
// Threading: immutable texts.
#pragma once

#include <string_view>

namespace delayd::storage::lua {

// Shared helpers. parse(v) -> job table {st, at, att, biz, f = {name = value}, payload} or nil.
// write(key, job, ex) SETs the record, with EX ex when ex > 0. enc() percent-encodes whitespace
// and '%' so that free text (an error) fits in one field. bump() counts; flush() writes counts.
inline constexpr std::string_view kPrelude = R"lua(
local FIRST = 6  -- KEYS index of the first job record; its arguments start at ARGV[5]
local FIELDS = {'last_error', 'ready_at', 'running_at', 'finished_at', 'cancelled_at', 'failed_at', 'error',
                'cancelled_early', 'every', 'count', 'rep', 'rd', 'nb', 'dead', 'ma', 'stop', 'h'}
local STATES = {delay = true, ready = true, running = true, finished = true, cancelled = true, failed = true}
-- The shard's key prefix "<prefix>:{<shard>}", from KEYS[1] ("...:pending"): a job's history
-- list and the shard's wake list live beside its other keys, in the same hash slot.
local SHARD = string.sub(KEYS[1], 1, -9)
local function hist_key(job_key) return SHARD .. ':history:' .. string.sub(job_key, #SHARD + 6) end
local function parse(v, with_payload)
  if type(v) ~= 'string' then return nil end
  local nl = string.find(v, '\n', 1, true)
  if not nl then return nil end
  local st, at, att, biz, rest = string.match(string.sub(v, 1, nl - 1), '^(%l+) (%d+) (%d+) (%S+)(.*)$')
  if not st or not STATES[st] or #at > 15 or #att > 9 then return nil end
  local f = {}
  if rest ~= '' then
    for k, val in string.gmatch(rest, ' ([%w_]+)=(%S*)') do f[k] = val end
  end
  local j = {st = st, at = tonumber(at), att = tonumber(att), biz = biz, f = f}
  if with_payload then j.payload = string.sub(v, nl + 1) end
  return j
end
local function write(key, j, ex)
  local parts = {j.st, string.format('%.0f', j.at), tostring(j.att), j.biz}
  for _, k in ipairs(FIELDS) do
    if j.f[k] then parts[#parts + 1] = k .. '=' .. j.f[k] end
  end
  local v = table.concat(parts, ' ') .. '\n' .. (j.payload or '')
  if ex > 0 then redis.call('SET', key, v, 'EX', ex) else redis.call('SET', key, v) end
  -- The history expires with the record (and lives while the record lives).
  if j.f.h then
    if ex > 0 then redis.call('EXPIRE', hist_key(key), ex) else redis.call('PERSIST', hist_key(key)) end
  end
end
local function enc(s)
  return (string.gsub(s, '[%%%s]', function(c) return string.format('%%%02X', string.byte(c)) end))
end
-- hist(key, j, event, detail): one line "<now> <event> <attempt> <detail>" at the end of the
-- job's history (the last 100 kept); marks the record (h=1) so that its later writes go the
-- slow way, which keeps the history. Call it before write().
local function hist(key, j, event, detail)
  local hk = hist_key(key)
  redis.call('RPUSH', hk, ARGV[1] .. ' ' .. event .. ' ' .. tostring(j.att) .. ' ' .. enc(detail or ''))
  redis.call('LTRIM', hk, -100, -1)
  j.f.h = '1'
end
-- The owner of the shard re-reads the pending entries of these ids (their time moved, maybe
-- earlier than what it has loaded).
local function wake(id) redis.call('RPUSH', SHARD .. ':wake', id) end
local counts = {}
local function bump(biz, st, n)
  if biz == '-' then return end
  local k = biz .. '|' .. st
  counts[k] = (counts[k] or 0) + n
end
local function flush()
  -- pcall: counters are for dashboards; a broken counters key must not fail the jobs' call
  -- after their writes are done (a script's writes are not rolled back on error).
  for k, n in pairs(counts) do if n ~= 0 then redis.pcall('HINCRBY', KEYS[2], k, n) end end
end
local function read(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return nil, v.err end
  return v
end
-- The header line only (for transitions that drop or keep the payload untouched): the first
-- 64 bytes (a pending job's line is about 30), or the whole record if its line is longer.
local function read_head(key)
  local v = redis.pcall('GETRANGE', key, 0, 63)
  if type(v) == 'table' and v.err then return nil, v.err end
  if v == '' then return false end
  if #v == 64 and not string.find(v, '\n', 1, true) then return read(key) end
  return v
end
-- A job in flight (claimed, its record maybe on its way) has an entry in the shard's in-flight
-- hash, "<attempt> <firing_at>", and its record is not rewritten by the claim (so the payload
-- never passes through Lua). in_flight(id) -> attempt, firing_at, or nil.
local function in_flight(id)
  local e = redis.call('HGET', KEYS[4], id)
  if not e then return nil end
  local att, at, epoch = string.match(e, '^(%d+) (%d+) ?(%d*)$')
  return tonumber(att), at, epoch
end
local now, retention, extra = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local stamp, fence = ARGV[1], ARGV[4]
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
-- Finishes a job that was delay: the payload goes (it is on its topic by now), the record
-- expires after the retention, the pending entry is removed. `detail`: a history line is
-- written for a failure always, for the other ends when the job has a history already.
local function finish(key, id, j, st, field, extra_fields, detail)
  local att = in_flight(id)
  if att then
    j.att = att
    redis.call('HDEL', KEYS[4], id)
  end
  j.st = st
  j.payload = nil
  j.f.last_error = nil
  j.f.nb = nil
  j.f.dead = nil
  j.f[field] = stamp
  for k, v in pairs(extra_fields or {}) do j.f[k] = v end
  if st == 'failed' or (st == 'cancelled' and j.f.h) then hist(key, j, st == 'failed' and 'dead' or st, detail) end
  write(key, j, retention)
  redis.call('ZREM', KEYS[1], id)
  bump(j.biz, 'delay', -1)
  bump(j.biz, st, 1)
end
-- delivered(key, id, j, keep, ack, max_att): settles a delay job whose ready record Kafka
-- acknowledged (kMarkReady, kMarkDelivered): a repeating job goes back to delay at its next
-- occurrence; otherwise it becomes ready, its payload kept (keep) or dropped; kept with
-- ack > 0, its pending entry waits at the ack deadline. Returns {changed, state, at}.
local function delivered(key, id, j, keep, ack, max_att)
  local att = in_flight(id)
  if att then
    j.att = att
    redis.call('HDEL', KEYS[4], id)
  end
  j.f.nb = nil
  j.f.last_error = nil
  j.f.ready_at = stamp
  local every = tonumber(j.f.every)
  if every then
    local rep, count = tonumber(j.f.rep) or 1, tonumber(j.f.count) or 0
    hist(key, j, 'delivered', 'occurrence ' .. rep)
    if j.f.stop then  -- cancelled while this occurrence was in flight: the series ends here
      j.f.stop = nil
      finish(key, id, j, 'cancelled', 'cancelled_at')
      return {1, 'cancelled', '0'}
    end
    -- The next occurrence on the grid deliver_at + k * every (no drift): the latest instant of
    -- the grid that has passed by now, or the next one if none has. So a delivery that ran late
    -- is followed at once by the one it delayed, and after a long stop only the most recent
    -- missed instant is delivered, the older ones skipped: never a burst of late occurrences.
    local steps = math.max(1, math.floor((now - j.at) / every))
    if count == 0 or rep + steps <= count then
      j.at = j.at + steps * every
      j.f.rep = string.format('%.0f', rep + steps)
      j.att = 0
      hist(key, j, 'repeat', 'occurrence ' .. j.f.rep .. ' at ' .. string.format('%.0f', j.at))
      write(key, j, 0)
      redis.call('ZADD', KEYS[1], j.at, id)
      bump(j.biz, 'repeated', 1)
      return {1, 'delay', string.format('%.0f', j.at)}
    end
  elseif keep or j.f.h then
    hist(key, j, 'delivered', '')
  end
  if not keep then
    finish(key, id, j, 'ready', 'ready_at')
    return {1, 'ready', '0'}
  end
  j.st = 'ready'
  bump(j.biz, 'delay', -1)
  bump(j.biz, 'ready', 1)
  if ack > 0 then
    redis.call('ZADD', KEYS[1], now + ack, id)
    if max_att > 0 then j.f.ma = tostring(max_att) end
    write(key, j, 0)
    return {1, 'ready', string.format('%.0f', now + ack)}
  end
  redis.call('ZREM', KEYS[1], id)
  write(key, j, retention)
  return {1, 'ready', '0'}
end
-- The slow way of settling a delivered job: its whole record read; a job no longer delay only
-- loses a stale pending entry (not an ack deadline of a ready or running one).
local function settle_read(key, id, keep, ack, max_att)
  local v = read(key)
  local j = parse(v, true)
  if j and j.st == 'delay' then return delivered(key, id, j, keep, ack, max_att) end
  if j and j.st ~= 'ready' and j.st ~= 'running' then redis.call('ZREM', KEYS[1], id) end
  return {0, j and j.st or (v and 'corrupt' or 'missing'), '0'}
end
local out = {}
)lua";

// Stride 4: job-id, deliver_at, business, record (the whole new record, "delay <deliver_at> 0
// <business>\n<payload>", written by the caller so that Lua does not copy the payload).
// ARGV[3] unused.
// Creates each job in state delay unless its record exists (the job-id is the idempotency key
// within a shard: a second publish never overwrites the first) and adds it to the pending set.
// A record that exists in state delay is re-added to the pending set at its own deliver_at
// (harmless, and it repairs nothing that could be missing: record and entry are written in the
// same call). A remembered cancel (see kCancel) is filled in with the job and stays cancelled.
// Per job: {code, state, deliver_at}; code 1 created, 0 existed, 2 "arrived after its cancel".
inline constexpr std::string_view kAccept = R"lua(
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 4
  local id, at, biz = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  if redis.call('SET', KEYS[i], ARGV[a + 3], 'NX') then
    redis.call('ZADD', KEYS[1], at, id)
    bump(biz, 'delay', 1)
    out[#out + 1] = {1, 'delay', at}
  else
    local j = parse((read_head(KEYS[i])))
    if not j then
      out[#out + 1] = {0, 'corrupt', '0'}
    elseif j.st == 'cancelled' and j.f.cancelled_early and j.biz == '-' then
      j.at = tonumber(at); j.biz = biz
      write(KEYS[i], j, retention)
      bump(biz, 'cancelled', 1)
      out[#out + 1] = {2, 'cancelled', at}
    else
      if j.st == 'delay' then redis.call('ZADD', KEYS[1], j.at, id) end
      out[#out + 1] = {0, j.st, string.format('%.0f', j.at)}
    end
  end
end
flush()
return out
)lua";

// Stride 1: job-id. ARGV[3] ahead_ms. Fenced. Takes jobs due by now + ahead_ms for delivery: counts the
// attempt and stamps firing_at in the in-flight hash, which from here on makes a cancel answer
// "in_flight" (the record may already be on its way, or held by the broker until its
// deliver_at). A job whose deliver_at is after now + ahead_ms is left alone ('early'); the
// broker never produces a record before its deliver_at by the wall clock (ahead_ms only lets
// it claim in advance). The caller reads each claimed record (GET) right after the call, in
// the same round trip, for the payload.
// What cannot be delivered is set aside in the same call: a stale entry (job finished) is
// removed; a corrupt record is kept for people as the payload of a record marked failed with
// error "corrupt job record: ..."; an entry with no readable record (none, or not a string)
// is moved to the quarantine hash with the reason.
// The lifecycle (README, "Job lifecycle"): a job is not due before its not-before time (nb, a
// retry after a failed report); a ready or running job whose ack deadline (its pending entry's
// score) passed is delivered again, as delay, with its kept payload, or, out of attempts (ma),
// goes round once more marked dead for its dead letter.
// Per job: {'deliver', deliver_at, business, attempt} for a plain job, or for any other
// {'deliver', deliver_at, business, attempt, repeat, 0, not_before, redelivery 0|1, dead reason};
// {'early', due}, {'finished', state}, {'corrupt', reason, business} or {'unreadable',
// reason[, why kept]}: the third value when the quarantine hash could not be written, so the
// entry was kept.
inline constexpr std::string_view kClaim = R"lua(
local refused = check_fence()
if refused then return refused end
for i = FIRST, #KEYS do
  local id = ARGV[i - 1]
  local v, err = read_head(KEYS[i])
  local j = parse(v)
  if err or not v then
    local why = err and ('job record unreadable: ' .. string.sub(err, 1, 200)) or 'no job record for this pending entry'
    local q = redis.pcall('HSET', KEYS[3], id, why)
    if type(q) == 'table' and q.err then
      out[#out + 1] = {'unreadable', why, 'kept: quarantine hash unwritable: ' .. string.sub(q.err, 1, 200)}
    else
      redis.call('ZREM', KEYS[1], id)
      out[#out + 1] = {'unreadable', why}
    end
  elseif not j then
    local whole = read(KEYS[i])
    local why = "corrupt job record: header line unreadable: '" .. string.sub(string.match(whole, '^[^\n]*'), 1, 64) .. "'"
    write(KEYS[i], {st = 'failed', at = 0, att = 0, biz = '-', f = {failed_at = stamp, error = enc(why)}, payload = whole}, retention)
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[4], id)
    out[#out + 1] = {'corrupt', why, '-'}
  elseif (j.st == 'ready' or j.st == 'running') and redis.call('ZSCORE', KEYS[1], id) then
    -- Delivered and waiting for a report until its ack deadline (the entry's score): once that
    -- passed, it goes round again, as delay, with its kept payload.
    local due = tonumber(redis.call('ZSCORE', KEYS[1], id))
    local whole = due <= now + extra and parse(read(KEYS[i]), true)
    if due > now + extra then
      out[#out + 1] = {'early', string.format('%.0f', due)}
    elseif not whole or not whole.payload or whole.payload == '' then
      redis.call('ZREM', KEYS[1], id)  -- nothing to deliver again: it waits for its report only
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
      write(KEYS[i], whole, 0)
      redis.call('HSET', KEYS[4], id, att .. ' ' .. stamp .. ' ' .. my_epoch)
      out[#out + 1] = {'deliver', string.format('%.0f', whole.at), whole.biz, att, whole.f.rep or '0', 0,
                       string.format('%.0f', due), 1, whole.f.dead or ''}
    end
  elseif j.st ~= 'delay' then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[4], id)
    out[#out + 1] = {'finished', j.st}
  else
    -- nb: not before (a retry after a failed report waits for its time, not only deliver_at).
    local due = math.max(j.at, tonumber(j.f.nb) or 0)
    if due > now + extra then
      out[#out + 1] = {'early', string.format('%.0f', due)}
    else
      -- A job marked dead goes to the dead-letter topic, not to a consumer: no attempt is added.
      local att = (in_flight(id) or j.att) + (j.f.dead and 0 or 1)
      redis.call('HSET', KEYS[4], id, att .. ' ' .. stamp .. ' ' .. my_epoch)
      if j.f.every or j.f.h or j.f.rd or j.f.dead or j.f.nb then
        out[#out + 1] = {'deliver', string.format('%.0f', j.at), j.biz, att, j.f.rep or '0', 0,
                         string.format('%.0f', due), 0, j.f.dead or ''}
      else  -- a plain job: the short form (the common case, kept cheap)
        out[#out + 1] = {'deliver', string.format('%.0f', j.at), j.biz, att}
      end
    end
  end
end
flush()
return out
)lua";

// Stride 4: job-id, deliver_at, attempt, business (as the claim handed them out; business ''
// when the caller does not know them). ARGV[3] unused. Not fenced (see FENCING above). After
// Kafka acknowledged each job's ready record, for plain jobs (Claim::plain: no repeat, no
// history) of businesses that keep no payload: the common case, kept cheap. The job's in-flight
// entry is removed (HDEL says it was there, so the job was claimed and is still delay: nothing
// else removes the entry without settling the job) and the finished record is written from the
// arguments, without reading the old one. Otherwise (a caller that does not know the fields,
// or an entry lost with a Redis restart) the record is read and settled (settle_read()).
// Per job: {changed, state, at}: at is the next occurrence (state delay), the ack deadline
// (ready), or 0. A job already final only loses its (stale) pending entry; a ready or running
// one keeps its ack deadline.
inline constexpr std::string_view kMarkReady = R"lua(
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 4
  local id, biz = ARGV[a], ARGV[a + 3]
  if biz ~= '' and redis.call('HDEL', KEYS[4], id) == 1 then
    local v = 'ready ' .. ARGV[a + 1] .. ' ' .. ARGV[a + 2] .. ' ' .. biz .. ' ready_at=' .. stamp .. '\n'
    if retention > 0 then redis.call('SET', KEYS[i], v, 'EX', retention) else redis.call('SET', KEYS[i], v) end
    redis.call('ZREM', KEYS[1], id)
    bump(biz, 'delay', -1)
    bump(biz, 'ready', 1)
    out[#out + 1] = {1, 'ready', '0'}
  else
    -- The header line first: a plain job still delay is finished from it, as above.
    local j = parse((read_head(KEYS[i])))
    if j and j.st == 'delay' and not (j.f.every or j.f.h) then
      finish(KEYS[i], id, j, 'ready', 'ready_at')
      out[#out + 1] = {1, 'ready', '0'}
    else
      out[#out + 1] = settle_read(KEYS[i], id, false, 0, 0)
    end
  end
end
flush()
return out
)lua";

// Stride 7: job-id, deliver_at, attempt, business, mode ('drop' or 'keep'), ack_ms,
// max_attempts. ARGV[3] unused. Not fenced (as kMarkReady). The jobs kMarkReady's fast way does
// not fit: the record is read and settled by delivered() (a repeat, a history, a payload kept
// for the lifecycle). 'keep' with ack_ms > 0 keeps max_attempts in the record (ma) for kClaim's
// decision after silence: deliver again, or dead-letter. Per job: {changed, state, at}.
inline constexpr std::string_view kMarkDelivered = R"lua(
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 7
  out[#out + 1] = settle_read(KEYS[i], ARGV[a], ARGV[a + 4] == 'keep', tonumber(ARGV[a + 5]) or 0,
                              tonumber(ARGV[a + 6]) or 0)
end
flush()
return out
)lua";

// Stride 5: job-id, error, refund, keep_firing, retry_at. ARGV[3] unused. Fenced. A delivery attempt
// failed and will be retried at retry_at: the pending entry is re-scored (XX: never resurrect
// an entry a finished job left). refund = 1: the attempt does not count (Kafka never answered
// with a permanent error), so `attempt` goes back down. keep_firing = 1: the record may have
// been written ("possibly persisted"), so firing_at stays and a cancel keeps answering
// in_flight until a later attempt settles the job; otherwise a cancel may win again.
// Per job: {changed, state}.
inline constexpr std::string_view kRelease = R"lua(
local refused = check_fence()
if refused then return refused end
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 5
  local j = parse((read(KEYS[i])), true)
  if j and j.st == 'delay' then
    local att, firing, epoch = in_flight(ARGV[a])
    att = att or j.att
    if ARGV[a + 2] == '1' and att > j.att then att = att - 1 end
    if ARGV[a + 3] == '1' and firing then
      redis.call('HSET', KEYS[4], ARGV[a], att .. ' ' .. firing .. ' ' .. (epoch ~= '' and epoch or my_epoch))
    else
      redis.call('HDEL', KEYS[4], ARGV[a])
    end
    j.att = att
    j.f.last_error = enc(ARGV[a + 1])
    hist(KEYS[i], j, 'retry', ARGV[a + 1])
    write(KEYS[i], j, 0)
    redis.call('ZADD', KEYS[1], 'XX', ARGV[a + 4], ARGV[a])
    out[#out + 1] = {1, 'delay'}
  else
    out[#out + 1] = {0, j and j.st or 'missing'}
  end
end
flush()
return out
)lua";

// Stride 2: job-id, reason. ARGV[3] unused. Fenced. Attempts exhausted, or the payload could not be
// read (the broker has already written the dead-letter record where there was one).
// Per job: {changed, state}.
inline constexpr std::string_view kMarkFailed = R"lua(
local refused = check_fence()
if refused then return refused end
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 2
  local j = parse((read_head(KEYS[i])))
  if j and j.st == 'delay' then
    finish(KEYS[i], ARGV[a], j, 'failed', 'failed_at', {error = enc(ARGV[a + 1])}, ARGV[a + 1])
    out[#out + 1] = {1, 'failed'}
  else
    if j then redis.call('ZREM', KEYS[1], ARGV[a]) end
    out[#out + 1] = {0, j and j.st or 'missing'}
  end
end
flush()
return out
)lua";

// Stride 1: job-id. ARGV[3] remember_s. Cancels each job that is pending and not in flight;
// answers 'in_flight' (unchanged) when a delivery attempt is under way, except for a repeating
// job: {1, 'in_flight'}, the occurrence under way is delivered and the series ends there (stop=1,
// kMarkReady then cancels it). An id with no record
// (its job may not have been read yet) is remembered when remember_s > 0: a record
// "cancelled 0 0 - cancelled_at=<now> cancelled_early=1" that expires after remember_s, which
// kAccept turns into the cancelled job if the job arrives in time. Per job: {changed, state}
// with state 'missing' for an unknown id (remembered or not).
inline constexpr std::string_view kCancel = R"lua(
for i = FIRST, #KEYS do
  local id = ARGV[i - 1]
  local v, err = read_head(KEYS[i])
  local j = parse(v)
  if err then
    out[#out + 1] = {0, 'corrupt'}
  elseif not v then
    if extra > 0 then
      write(KEYS[i], {st = 'cancelled', at = 0, att = 0, biz = '-', f = {cancelled_at = stamp, cancelled_early = '1'}}, extra)
    end
    out[#out + 1] = {0, 'missing'}
  elseif not j then
    out[#out + 1] = {0, 'corrupt'}
  elseif j.st ~= 'delay' then
    out[#out + 1] = {0, j.st}
  elseif in_flight(id) and j.f.every then
    -- An occurrence is on its way (it cannot be recalled); the series ends once it is
    -- delivered (kMarkReady sees stop=1). Answered {1, 'in_flight'}.
    local whole = parse(read(KEYS[i]), true)
    whole.f.stop = '1'
    write(KEYS[i], whole, 0)
    out[#out + 1] = {1, 'in_flight'}
  elseif in_flight(id) then
    out[#out + 1] = {0, 'in_flight'}
  else
    finish(KEYS[i], id, j, 'cancelled', 'cancelled_at')
    out[#out + 1] = {1, 'cancelled'}
  end
end
flush()
return out
)lua";

// Stride 7: job-id, status, error, retry_at, max_attempts, ack_ms, attempt. ARGV[3] unused. Not fenced:
// like accept and cancel it applies a record of a topic (the status topic), whichever member
// reads it. A consumer's report on a delivered job (README, "Job lifecycle"):
//   running   ready or running -> running, running_at now; an ack deadline moves to now + ack_ms
//   finished  ready or running -> finished: payload dropped, expires after the retention
//   failed    ready or running -> with a payload: back to delay, due at retry_at (nb), its
//             pending entry re-scored and the shard's owner woken; out of attempts (attempt >=
//             max_attempts) due at once and marked dead=<reason>, so that the owner's claim
//             dead-letters it. Without a payload (its business keeps none): failed at once.
// Any other pair (a report for a job still delay, one after finished, a repeating job) is
// ignored, so reports are idempotent and can arrive in any order; so is a report that names an
// attempt (the ready record's `attempt` header, echoed; '0' when not given) other than the
// job's current one: it is about an earlier delivery.
// A report for a job in flight (claimed, its delivery not settled: the consumer read the record
// before Kafka's acknowledgement reached delayd) is not applied yet: verdict 'wait'.
// Per job: {verdict, state, at}: verdict 'applied', 'ignored', 'wait' or 'unknown' (no record),
// state after the call ('dead': back to delay for its dead letter), at the retry time or 0.
inline constexpr std::string_view kReport = R"lua(
local function report(key, id, j, status, err, retry_at, max_att, ack)
  local waiting = redis.call('ZSCORE', KEYS[1], id)  -- the ack deadline, if the business has one
  if status == 'running' then
    if j.st == 'ready' then
      bump(j.biz, 'ready', -1)
      bump(j.biz, 'running', 1)
    end
    j.st = 'running'
    j.f.running_at = stamp
    hist(key, j, 'running', '')
    if waiting and ack > 0 then redis.call('ZADD', KEYS[1], now + ack, id) end
    write(key, j, waiting and 0 or retention)
    return {'applied', 'running', '0'}
  end
  bump(j.biz, j.st, -1)
  if status == 'finished' or not j.payload or j.payload == '' then
    j.f.last_error = nil
    if status == 'finished' then
      j.st = 'finished'
      j.f.finished_at = stamp
    else
      j.st = 'failed'
      j.f.failed_at = stamp
      j.f.error = enc('reported failed: ' .. err .. ' (not delivered again: business ' .. j.biz ..
                      ' keeps no payload, see scheduler.keep_payload)')
    end
    hist(key, j, status, status == 'failed' and err or '')
    j.payload = nil
    bump(j.biz, j.st, 1)
    write(key, j, retention)
    redis.call('ZREM', KEYS[1], id)
    return {'applied', j.st, '0'}
  end
  hist(key, j, 'failed', err)
  j.f.last_error = enc(err)
  local at = retry_at
  if j.att >= max_att then
    j.f.dead = enc('reported failed after ' .. j.att .. ' attempts: ' .. err)
    at = now
  end
  j.st = 'delay'
  j.f.nb = string.format('%.0f', at)
  bump(j.biz, 'delay', 1)
  write(key, j, 0)
  redis.call('ZADD', KEYS[1], at, id)
  wake(id)
  return {'applied', j.f.dead and 'dead' or 'delay', string.format('%.0f', at)}
end
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 7
  local v, err = read(KEYS[i])
  local j = parse(v, true)
  local about = tonumber(ARGV[a + 6]) or 0
  if not v and not err then
    out[#out + 1] = {'unknown', 'missing', '0'}
  elseif not j then
    out[#out + 1] = {'ignored', 'corrupt', '0'}
  elseif j.st == 'delay' and not j.f.every and in_flight(ARGV[a]) then
    -- Claimed and maybe produced, its delivery not settled yet: the consumer may well be faster
    -- than Kafka's acknowledgement to delayd. The caller asks again shortly.
    out[#out + 1] = {'wait', 'in_flight', '0'}
  elseif (j.st ~= 'ready' and j.st ~= 'running') or j.f.every or (about > 0 and about ~= j.att) then
    out[#out + 1] = {'ignored', j.st, '0'}
  else
    out[#out + 1] = report(KEYS[i], ARGV[a], j, ARGV[a + 1], string.sub(ARGV[a + 2], 1, 1000),
                           tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
  end
end
flush()
return out
)lua";

// Stride 2: job-id, deliver_at. ARGV[3] unused. Not fenced (an ingest record, like cancel).
// Moves a job that is delay and not in flight to the new deliver_at (earlier, later, or past:
// then it is due at once), re-scores its pending entry and wakes the shard's owner, which moves
// the job's timer. Per job: {changed, state}: 'in_flight' (unchanged: its delivery is under way,
// like a late cancel), 'missing', or the state of a job that is not delay.
inline constexpr std::string_view kReschedule = R"lua(
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 2
  local id, at = ARGV[a], ARGV[a + 1]
  local v, err = read(KEYS[i])
  local j = parse(v, true)
  if err or (v and not j) then
    out[#out + 1] = {0, 'corrupt'}
  elseif not v then
    out[#out + 1] = {0, 'missing'}
  elseif j.st ~= 'delay' then
    out[#out + 1] = {0, j.st}
  elseif in_flight(id) then
    out[#out + 1] = {0, 'in_flight'}
  else
    hist(KEYS[i], j, 'rescheduled', 'from ' .. string.format('%.0f', j.at) .. ' to ' .. at)
    j.at = tonumber(at)
    j.f.nb = nil
    write(KEYS[i], j, 0)
    redis.call('ZADD', KEYS[1], at, id)
    wake(id)
    out[#out + 1] = {1, 'delay'}
  end
end
flush()
return out
)lua";

// Not a batch script: KEYS[1] the shard's owner key, ARGV[1] the member taking it (no spaces),
// ARGV[2] now. Makes the caller the shard's owner with the next epoch and returns that epoch.
// A missing owner key starts at epoch 1. Deleting or hand-editing the key breaks the order of
// epochs (a stale member might hold the new number): never do it while brokers run.
inline constexpr std::string_view kTakeShard = R"lua(
local old = redis.call('GET', KEYS[1])
local epoch = (old and tonumber(string.match(old, '^(%d+)')) or 0) + 1
redis.call('SET', KEYS[1], string.format('%.0f', epoch) .. ' ' .. ARGV[1] .. ' ' .. ARGV[2])
-- The new owner loads the whole pending set: what the wake list says is in it already.
redis.call('DEL', string.sub(KEYS[1], 1, -7) .. ':wake')
return epoch
)lua";

}  // namespace delayd::storage::lua
