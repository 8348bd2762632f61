-- The finish step, with the commands delayd's mark-ready issues per job in the common case
-- (storage/lua/mark_ready.lua): drop the in-flight entry (HDEL), replace the record by
-- a small one that expires after a day (SET EX), and take it off the pending set (ZREM). No
-- string building: the floor under delayd's own mark.
--   KEYS[1] counter (its own, walking the keys lean-accept.lua wrote)  KEYS[2] pending sorted set
--   ARGV[1] job key prefix  ARGV[2] jobs per call  ARGV[3] the finished value (a few bytes)
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
local in_flight = ARGV[1] .. 'inflight'
for i = last - n + 1, last do
  local id = ARGV[1] .. i
  redis.call('HDEL', in_flight, id)
  redis.call('SET', id, ARGV[3], 'EX', 86400)
  redis.call('ZREM', KEYS[2], id)
end
return last
