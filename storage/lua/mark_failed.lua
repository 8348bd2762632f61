-- mark_failed: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 2: job-id, reason. ARGV[3] unused. Fenced. Attempts exhausted, or the payload could not be
-- read (the broker has already written the dead-letter record where there was one).
-- Per job: {changed, state}.
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
