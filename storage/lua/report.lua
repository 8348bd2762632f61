-- report: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 7: job-id, status, error, retry_at, max_attempts, ack_ms, attempt. ARGV[3] unused. Not fenced:
-- like accept and cancel it applies a record of a topic (the status topic), whichever member
-- reads it. A consumer's report on a delivered job (docs/consuming.md, "Job lifecycle"):
--   running   ready or running -> running, running_at now; an ack deadline moves to now + ack_ms
--   finished  ready or running -> finished: payload dropped, expires after the retention
--   failed    ready or running -> with a payload: back to delay, due at retry_at (nb), its
--             pending entry re-scored and the shard's owner woken; out of attempts (attempt >=
--             max_attempts) due at once and marked dead=<reason>, so that the owner's claim
--             dead-letters it. Without a payload (its business keeps none): failed at once.
-- Any other pair (a report for a job still delay, one after finished, a repeating job) is
-- ignored, so reports are idempotent and can arrive in any order; so is a report that names an
-- attempt (the ready record's `attempt` header, echoed; '0' when not given) other than the
-- job's current one: it is about an earlier delivery.
-- A report for a job in flight (claimed, its delivery not settled: the consumer read the record
-- before Kafka's acknowledgement reached delayd) is not applied yet: verdict 'wait'.
-- Per job: {verdict, state, at}: verdict 'applied', 'ignored', 'wait' or 'unknown' (no record),
-- state after the call ('dead': back to delay for its dead letter), at the retry time or 0.
local function report(key, id, j, status, err, retry_at, max_att, ack)
  local waiting = entry_find(id, j.e0)  -- the ack deadline, if the business has one
  if status == 'running' then
    if j.st == 'ready' then
      bump(j.biz, 'ready', -1)
      bump(j.biz, 'running', 1)
    end
    j.st = 'running'
    j.f.running_at = stamp
    hist(key, j, 'running', '')
    -- nb: the ack deadline (a heartbeat moves it), or none when nothing waits.
    if waiting then
      j.f.nb = string.format('%.0f', ack > 0 and now + ack or math.ceil(waiting))
      j.e0 = waiting  -- where the entry is, whatever the record said
      entry_move(id, j)
    else
      j.f.nb = nil
    end
    write(key, j, waiting and 0 or retention)
    return {'applied', 'running', '0'}
  end
  bump(j.biz, j.st, -1)
  if status == 'finished' or not j.payload or j.payload == '' then
    j.f.last_error = nil
    j.f.nb = nil
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
    entry_move(id, j)
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
  repend(key, id, j)
  return {'applied', j.f.dead and 'dead' or 'delay', string.format('%.0f', entry_at(j))}
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
  elseif j.st == 'delay' and not repeats(j) and in_flight(ARGV[a]) then
    -- Claimed and maybe produced, its delivery not settled yet: the consumer may well be faster
    -- than Kafka's acknowledgement to delayd. The caller asks again shortly.
    out[#out + 1] = {'wait', 'in_flight', '0'}
  elseif (j.st ~= 'ready' and j.st ~= 'running') or repeats(j) or (about > 0 and about ~= j.att) then
    out[#out + 1] = {'ignored', j.st, '0'}
  else
    out[#out + 1] = report(KEYS[i], ARGV[a], j, ARGV[a + 1], string.sub(ARGV[a + 2], 1, 1000),
                           tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
  end
end
flush()
return out
