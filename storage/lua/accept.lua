-- accept: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 4: job-id, deliver_at, business, record (the whole new record, "delay <deliver_at> 0
-- <business>\n<payload>", written by the caller so that Lua does not copy the payload).
-- ARGV[3] unused.
-- Creates each job in state delay unless its record exists (the job-id is the idempotency key
-- within a shard: a second publish never overwrites the first) and adds it to the pending set.
-- A record that exists in state delay is re-added to the pending set at its own deliver_at
-- (harmless, and it repairs nothing that could be missing: record and entry are written in the
-- same call). A remembered cancel (see cancel.lua) is filled in with the job and stays cancelled.
-- A failed job is revived (state delay, from the new record) by a redriven dead letter of it:
-- a record whose rv (redrive-count) is higher than the failed one's, so that each redrive
-- revives it once, however often its ingest record is read again.
-- Per job: {code, state, deliver_at}; code 1 created (or revived), 0 existed, 2 "arrived after its
-- cancel".
-- Whether the new record `v` (its first line) revives the failed job j: it carries a
-- redrive-count (rv) higher than the one j was created or last revived with.
local function revives(v, j)
  local n = parse(v)
  return n ~= nil and (tonumber(n.f.rv) or 0) > (tonumber(j.f.rv) or 0)
end
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
    elseif j.st == 'failed' and revives(ARGV[a + 3], j) then
      -- A redriven dead letter of this failed job: the job lives again from the new record (a
      -- first attempt), its history kept and told why.
      local n = parse(ARGV[a + 3], true)
      n.st0, n.f.h, n.f.last_error = 'failed', j.f.h, j.f.error
      hist(KEYS[i], n, 'redriven', 'redrive ' .. n.f.rv .. ' of its dead letter ' .. (j.f.dl or '?'))
      write(KEYS[i], n, 0)
      redis.call('ZADD', KEYS[1], at, id)
      bump(j.biz, 'failed', -1)
      bump(biz, 'delay', 1)
      out[#out + 1] = {1, 'delay', at}
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
