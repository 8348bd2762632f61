-- accept: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 5: job-id, deliver_at, business, version, record (the whole new record, "delay
-- <deliver_at> 0 <business>[ fields]\n<payload>", written by the caller so that Lua does not copy
-- the payload of a plain schedule). ARGV[3] unused.
-- version '' (a schedule): creates the job in state delay unless its record exists (the job-id
-- is the idempotency key within a shard: a second publish never overwrites the first) and adds
-- it to the pending set. A record that exists in state delay is re-added to the pending set at
-- its own deliver_at (harmless, and it repairs nothing that could be missing: record and entry
-- are written in the same call). A remembered cancel (see cancel.lua) is filled in with the job
-- and stays cancelled. A failed job is revived (state delay, from the new record) by a
-- redriven dead letter of it: a record whose rv (redrive-count) is higher than the failed
-- one's, so that each redrive revives it once, however often its ingest record is read again.
-- version '<offset>' (an upsert, docs/producing.md "Latest wins"; the record carries vo=<offset>, the
-- ingest offset it was read at, which orders the versions of one id within the shard): latest
-- wins.
--   no record               created, as a schedule
--   vo >= offset            a version read again (a replay after a crash) or older: nothing
--   delay, in flight        nothing yet: the caller applies it again once the delivery settles
--   delay                   replaced (time, payload, headers, business), its attempts and
--                           history kept, its pending entry moved, the owner woken
--   a remembered cancel     stays cancelled, as a schedule (the cancel came first), unless it was
--                           read earlier in this partition (its vo below the offset): a new job
--   ready, running, final   a new job of the id (attempts from 0), the history kept and told
--                           what the earlier job became
-- Per job: {code, state, deliver_at}; code (storage::AcceptKind) 1 created (or revived), 0
-- existed, 2 "arrived after its cancel", 3 in flight, 4 updated, 5 a new job of a used id. A job
-- created the plain way (no record stood under its id) is the integer 1 alone: state delay at
-- the deliver_at it was given (making and sending 500 triples cost Redis about 0.75 us a job, a
-- tenth of a plain accept; job_store.cpp's accept_outcomes() reads both forms).
-- Whether the new record `v` (its first line) revives the failed job j: it carries a
-- redrive-count (rv) higher than the one j was created or last revived with.
local function revives(v, j)
  local n = parse(v)
  return n ~= nil and (tonumber(n.f.rv) or 0) > (tonumber(j.f.rv) or 0)
end
-- An upsert meeting the existing job j (its header line): {code, state, deliver_at}.
local function upsert(key, id, j, at, biz, version, v)
  if (tonumber(j.f.vo) or -1) >= version then
    if j.st == 'delay' then pend(id, j) end
    return {0, j.st, string.format('%.0f', j.at)}
  end
  -- A remembered cancel holds, unless it came earlier in this partition (its vo, below ours).
  if j.st == 'cancelled' and j.f.cancelled_early and j.biz == '-' and not j.f.vo then return nil end
  if j.st == 'delay' and in_flight(id) then return {3, 'in_flight', string.format('%.0f', j.at)} end
  local n = parse(v, true)
  n.st0, n.biz0, n.e0, n.f.h = j.st, j.biz, j.e0, j.f.h
  if j.st == 'delay' then
    n.att = j.att
    hist(key, n, 'updated', 'from ' .. string.format('%.0f', j.at) .. ' to ' .. at .. ' (offset ' .. version .. ')')
    bump(j.biz, 'delay', -1)
    bump(biz, 'delay', 1)
    repend(key, id, n)
    return {4, 'delay', at}
  end
  hist(key, n, 'scheduled-again', 'its earlier job was ' .. j.st .. ' after ' .. j.att .. ' attempts (offset ' ..
       version .. ')')
  bump(j.biz, j.st, -1)
  bump(biz, 'delay', 1)
  repend(key, id, n)
  return {5, 'delay', at}
end
-- The pending entries of the jobs created the plain way are added together, in one ZADD (so
-- that Redis spends its time on the jobs, not on calls from Lua), and their waiting-index
-- entries in one ZADD per business (wadd_later()): before any other job of the batch is looked
-- at, and at the end, so that every entry is written in the batch's order.
local created = {}
local function pend_created()
  if #created > 0 then
    entries_put(created)
    created = {}
  end
  wflush()
end
-- Whether a record of any of the batch's jobs is a key (a settled job's, or 0.3's delay record):
-- one call for the batch. When none is, a job is new exactly when its field is set in the
-- shard's hash of delay records (key_schema.hpp); else each job's key is looked at first.
local keyed = #KEYS >= FIRST and redis.call('EXISTS', unpack(KEYS, FIRST)) > 0
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 5
  local id, at, biz, version, rec = ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4]
  if not (keyed and redis.call('EXISTS', KEYS[i]) == 1) and redis.call('HSETNX', JOBS, id, rec) == 1 then
    where[id] = 'hash'
    created[#created + 1] = at
    created[#created + 1] = id
    wadd_later(id, biz, at)
    bump(biz, 'delay', 1)
    out[#out + 1] = 1
  else
    pend_created()
    local j = parse((read_head(KEYS[i])))
    local done = j and version and upsert(KEYS[i], id, j, at, biz, version, rec)
    if done then
      out[#out + 1] = done
    elseif not j then
      out[#out + 1] = {0, 'corrupt', '0'}
    elseif j.st == 'failed' and revives(rec, j) then
      -- A redriven dead letter of this failed job: the job lives again from the new record (a
      -- first attempt), its history kept and told why.
      local n = parse(rec, true)
      n.st0, n.e0, n.f.h, n.f.last_error = 'failed', j.e0, j.f.h, j.f.error
      hist(KEYS[i], n, 'redriven', 'redrive ' .. n.f.rv .. ' of its dead letter ' .. (j.f.dl or '?'))
      write(KEYS[i], n, 0)
      pend(id, n)
      bump(j.biz, 'failed', -1)
      bump(biz, 'delay', 1)
      out[#out + 1] = {1, 'delay', at}
    elseif j.st == 'cancelled' and j.f.cancelled_early and j.biz == '-' then
      j.at = tonumber(at); j.biz = biz
      write(KEYS[i], j, retention)
      bump(biz, 'cancelled', 1)
      out[#out + 1] = {2, 'cancelled', at}
    else
      if j.st == 'delay' then pend(id, j) end  -- where its record says (a retry's nb too)
      out[#out + 1] = {0, j.st, string.format('%.0f', j.at)}
    end
  end
end
pend_created()
flush()
return out
