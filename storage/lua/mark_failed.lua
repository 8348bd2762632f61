-- mark_failed: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 4: job-id, reason, dead letter, keep. ARGV[3] unused. Fenced. Attempts exhausted, or the
-- payload could not be read (the broker has already written the dead-letter record where there
-- was one: "<partition>:<offset>" of the dead-letter topic, kept as dl, '' for none). keep '1':
-- the payload stays with the failed record (its business keeps payloads), so that an operator
-- can retry the job from Redis (retry.lua). Per job: {changed, state}. A job no longer delay is
-- left as it is, its pending entry too: a delivered job's is its ack deadline, which redelivers
-- it if its consumer stays silent (a finished one has none; the claim removes a stale one).
local refused = check_fence()
if refused then return refused end
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 4
  local keep = ARGV[a + 3] == '1'
  local j = keep and parse((read(KEYS[i])), true) or parse((read_head(KEYS[i])))
  if j and j.st == 'delay' then
    local extra_fields = {error = enc(ARGV[a + 1])}
    if ARGV[a + 2] ~= '' then extra_fields.dl = ARGV[a + 2] end
    finish(KEYS[i], ARGV[a], j, 'failed', 'failed_at', extra_fields, ARGV[a + 1], keep)
    out[#out + 1] = {1, 'failed'}
  else
    out[#out + 1] = {0, j and j.st or 'missing'}
  end
end
flush()
return out
