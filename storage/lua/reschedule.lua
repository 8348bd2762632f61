-- reschedule: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 2: job-id, deliver_at. ARGV[3] unused. Not fenced (an ingest record, like cancel).
-- Moves a job that is delay and not in flight to the new deliver_at (earlier, later, or past:
-- then it is due at once), re-scores its pending entry and wakes the shard's owner, which moves
-- the job's timer. Per job: {changed, state}: 'in_flight' (unchanged: its delivery is under way,
-- like a late cancel), 'missing', or the state of a job that is not delay.
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
    repend(KEYS[i], id, j)
    out[#out + 1] = {1, 'delay'}
  end
end
flush()
return out
