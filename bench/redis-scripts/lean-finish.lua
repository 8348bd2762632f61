-- The finish step, with the commands delayd's mark-ready issues in the common case
-- (storage/lua/mark_ready.lua), batched as it batches them: look up and drop the call's in-flight
-- entries (HMGET, one HDEL), write each record as a small key of its own that expires after a
-- day (SET EX, per job), and take the jobs off the hash of waiting records (one HDEL) and the
-- pending set (one ZREM). No string building: the floor under delayd's own mark (which also
-- files each job in the ready state's index, not counted here).
--   KEYS[1] counter (its own, walking the jobs lean-accept.lua wrote)  KEYS[2] pending sorted set
--   ARGV[1] job key prefix (the hash of records is ARGV[1] .. 'jobs')  ARGV[2] jobs per call
--   ARGV[3] the finished value (a few bytes)
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
local in_flight, records = ARGV[1] .. 'inflight', ARGV[1] .. 'jobs'
local ids, keys = {}, {}
for i = last - n + 1, last do
  ids[#ids + 1] = tostring(i)
  keys[#keys + 1] = ARGV[1] .. i
end
redis.call('HMGET', in_flight, unpack(ids))
redis.call('HDEL', in_flight, unpack(ids))
for _, key in ipairs(keys) do redis.call('SET', key, ARGV[3], 'EX', 86400) end
redis.call('HDEL', records, unpack(ids))
redis.call('ZREM', KEYS[2], unpack(keys))
return last
