-- The claim step of a lean delayed-job store (see lean-accept.lua): per job, read the record
-- (GET) and write it back marked as in flight (SET), as the fire path does before producing.
--   KEYS[1] counter (its own, walking the keys lean-accept.lua wrote)  KEYS[2] pending sorted set
--   ARGV[1] job key prefix  ARGV[2] jobs per call  ARGV[3] the claimed value (240 bytes)
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
for i = last - n + 1, last do
  local id = ARGV[1] .. i
  if redis.call('GET', id) then
    redis.call('SET', id, ARGV[3])
  end
end
return last
