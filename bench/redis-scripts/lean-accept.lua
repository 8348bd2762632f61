-- The accept step of a lean delayed-job store, for bench/run-e2e.sh's machine limit: one call
-- takes a batch of ARGV[2] jobs, laid out as delayd lays them out (storage/key_schema.hpp: a
-- waiting job's record is a field of its shard's hash, a settled one's a key of its own): it
-- looks for keys of the batch's ids in one EXISTS, stores each record unless its field exists
-- (HSETNX: the first publish wins), and files the batch by due time in one ZADD (as
-- storage/lua/accept.lua does). Job numbers come from a counter, so every call writes new jobs
-- and the claim and finish steps later walk the same jobs in the same order.
--   KEYS[1] counter  KEYS[2] pending sorted set
--   ARGV[1] job key prefix (the hash of records is ARGV[1] .. 'jobs')  ARGV[2] jobs per call
--   ARGV[3] the stored value (240 bytes)
-- Every key carries the same hash tag, so the store would run unchanged on Redis Cluster.
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
local records = ARGV[1] .. 'jobs'
local keys = {}
for i = last - n + 1, last do keys[#keys + 1] = ARGV[1] .. i end
redis.call('EXISTS', unpack(keys))
local scored = {}
for i = last - n + 1, last do
  if redis.call('HSETNX', records, tostring(i), ARGV[3]) == 1 then
    scored[#scored + 1] = 1900000000000 + i
    scored[#scored + 1] = ARGV[1] .. i
  end
end
if #scored > 0 then redis.call('ZADD', KEYS[2], unpack(scored)) end
return last
