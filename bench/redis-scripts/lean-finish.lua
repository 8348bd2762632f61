-- The finish step of a lean delayed-job store (see lean-accept.lua): per job, replace the record
-- by a small one that expires after a day (SET EX 86400) and take it off the pending set (ZREM),
-- as the fire path does once the ready record is acknowledged.
--   KEYS[1] counter (its own, walking the keys lean-accept.lua wrote)  KEYS[2] pending sorted set
--   ARGV[1] job key prefix  ARGV[2] jobs per call  ARGV[3] the finished value (a few bytes)
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
for i = last - n + 1, last do
  local id = ARGV[1] .. i
  redis.call('SET', id, ARGV[3], 'EX', 86400)
  redis.call('ZREM', KEYS[2], id)
end
return last
