-- find: where the pending entry of each job is, for take_wakes() (job_store.cpp: the owner
-- re-reads the entries a report or reschedule moved), run after prelude.lua (keys and
-- ARGV[1..4]: lua_scripts.hpp; ARGV[3] unused). Stride 1: job-id. Not fenced, and it writes
-- nothing. The entry is looked for where the job's record says (entry_find()). Per job: its
-- entry's score (epoch ms), or '' when it has none.
for i = FIRST, #KEYS do
  local id = ARGV[i - 1]
  local j = parse((read_head(KEYS[i])))
  local score = entry_find(id, j and j.e0)
  out[#out + 1] = score and string.format('%.0f', score) or ''
end
return out
