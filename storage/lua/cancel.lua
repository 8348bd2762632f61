-- cancel: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 2: job-id, version (the cancel record's offset in this shard, or ''). ARGV[3] remember_s.
-- With a version: a job whose version (vo, an upsert's offset) is above it was upserted after
-- this cancel in the partition, and the cancel is one read again: nothing changes ({0, state});
-- a remembered cancel keeps the version (vo), so that an upsert after it in the partition wins
-- over it (accept.lua). Cancels each job that is pending and not in flight;
-- answers 'in_flight' (unchanged) when a delivery attempt is under way, except for a repeating
-- job: {1, 'in_flight'}, the occurrence under way is delivered and the series ends there (stop=1,
-- delivered() in prelude_jobs.lua then cancels it: a repeating job is never plain, so mark_delivered.lua
-- settles it). An id with no record
-- (its job may not have been read yet) is remembered when remember_s > 0: a record
-- "cancelled 0 0 - cancelled_at=<now> cancelled_early=1" that expires after remember_s, which
-- accept.lua turns into the cancelled job if the job arrives in time. Per job: {changed, state}
-- with state 'missing' for an unknown id (remembered or not).
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 2
  local id, version = ARGV[a], tonumber(ARGV[a + 1])
  local v, err = read_head(KEYS[i])
  local j = parse(v)
  if err then
    out[#out + 1] = {0, 'corrupt'}
  elseif not v then
    if extra > 0 then
      write(KEYS[i], {st = 'cancelled', at = 0, att = 0, biz = '-',
                      f = {cancelled_at = stamp, cancelled_early = '1', vo = version and ARGV[a + 1] or nil}}, extra)
    end
    out[#out + 1] = {0, 'missing'}
  elseif not j then
    out[#out + 1] = {0, 'corrupt'}
  elseif version and (tonumber(j.f.vo) or -1) > version then
    out[#out + 1] = {0, j.st}
  elseif j.st ~= 'delay' then
    out[#out + 1] = {0, j.st}
  else
    local att = in_flight(id)
    if att and repeats(j) then
      -- An occurrence is on its way (it cannot be recalled); the series ends once it is
      -- delivered (delivered() in prelude_jobs.lua, through mark_delivered.lua, sees stop=1).
      -- Answered {1, 'in_flight'}.
      local whole = parse(read(KEYS[i]), true)
      whole.f.stop = '1'
      write(KEYS[i], whole, 0)
      out[#out + 1] = {1, 'in_flight'}
    elseif att then
      out[#out + 1] = {0, 'in_flight'}
    else
      finish(KEYS[i], id, j, 'cancelled', 'cancelled_at', nil, nil, nil, false)
      out[#out + 1] = {1, 'cancelled'}
    end
  end
end
flush()
return out
