-- release: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 5: job-id, error, refund, keep_firing, retry_at. ARGV[3] unused. Fenced. A delivery attempt
-- failed and will be retried at retry_at, written as the job's nb (not before): the pending entry
-- moves to the later of deliver_at and nb (entry_move(): only a job still delay has one, so a
-- finished job's entry is never resurrected). refund = 1: the attempt does not count (Kafka never answered
-- with a permanent error), so `attempt` goes back down. keep_firing = 1: the record may have
-- been written ("possibly persisted"), so firing_at stays and a cancel keeps answering
-- in_flight until a later attempt settles the job; otherwise a cancel may win again.
-- Per job: {changed, state}.
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
    j.f.mv = stamp
    j.f.nb = ARGV[a + 4]
    write(KEYS[i], j, 0)
    wadd(ARGV[a], j.biz, entry_move(ARGV[a], j))
    out[#out + 1] = {1, 'delay'}
  else
    out[#out + 1] = {0, j and j.st or 'missing'}
  end
end
flush()
return out
