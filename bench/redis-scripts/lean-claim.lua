-- The claim step, with the commands delayd's claim issues (storage/lua/claim.lua), batched as it
-- batches them: read the call's records from the hash of waiting records (HMGET), look up their
-- in-flight entries (HMGET), write them (one HSET), and read the records again for their
-- payloads (HMGET; delayd pipelines it right after the script call). No parsing: the floor
-- under delayd's claim.
--   KEYS[1] counter (its own, walking the jobs lean-accept.lua wrote)  KEYS[2] pending sorted set
--   ARGV[1] job key prefix (the hash of records is ARGV[1] .. 'jobs')  ARGV[2] jobs per call
--   ARGV[3] the in-flight entry
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
local in_flight, records = ARGV[1] .. 'inflight', ARGV[1] .. 'jobs'
local ids, entries = {}, {}
for i = last - n + 1, last do
  local id = tostring(i)
  ids[#ids + 1] = id
  entries[#entries + 1] = id
  entries[#entries + 1] = ARGV[3]
end
redis.call('HMGET', records, unpack(ids))
redis.call('HMGET', in_flight, unpack(ids))
redis.call('HSET', in_flight, unpack(entries))
redis.call('HMGET', records, unpack(ids))
return last
