-- retry: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 1: job-id. ARGV[3] unused. Not fenced: an operator's action, like a reschedule. A
-- failed job whose payload is kept (scheduler.keep_payload) goes back to delay, due at once, as
-- a new attempt: its error becomes last_error, its pending entry is added and the shard's
-- owner woken. Per job: {changed, state}: {0, 'failed'} when it has no payload (nothing to
-- deliver again from Redis), 'missing', 'corrupt', or the state of a job that is not failed.
for i = FIRST, #KEYS do
  local id = ARGV[i - 1]
  local v, err = read(KEYS[i])
  local j = parse(v, true)
  if err or (v and not j) then
    out[#out + 1] = {0, 'corrupt'}
  elseif not v then
    out[#out + 1] = {0, 'missing'}
  elseif j.st ~= 'failed' then
    out[#out + 1] = {0, j.st}
  elseif not j.payload or j.payload == '' or j.biz == '-' then
    out[#out + 1] = {0, 'failed'}
  else
    hist(KEYS[i], j, 'retried', 'by an operator')
    bump(j.biz, 'failed', -1)
    bump(j.biz, 'delay', 1)
    j.st = 'delay'
    j.f.last_error = j.f.error
    j.f.error, j.f.failed_at, j.f.dead, j.f.dl = nil, nil, nil, nil
    j.f.nb = stamp  -- due at once: not before now
    repend(KEYS[i], id, j)
    out[#out + 1] = {1, 'delay'}
  end
end
flush()
return out
