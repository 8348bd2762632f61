-- The claim step, with the commands delayd's claim issues per job (storage/lua/claim.lua):
-- read the record's header line (GETRANGE, 64 bytes), look up and write the attempt in
-- the shard's in-flight hash (HGET, HSET), and read the whole record for its payload (GET;
-- delayd pipelines it right after the script call). No parsing: the floor under delayd's claim.
--   KEYS[1] counter (its own, walking the keys lean-accept.lua wrote)  KEYS[2] pending sorted set
--   ARGV[1] job key prefix  ARGV[2] jobs per call  ARGV[3] the in-flight entry
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
local in_flight = ARGV[1] .. 'inflight'
for i = last - n + 1, last do
  local id = ARGV[1] .. i
  if redis.call('GETRANGE', id, 0, 63) ~= '' then
    redis.call('HGET', in_flight, id)
    redis.call('HSET', in_flight, id, ARGV[3])
    redis.call('GET', id)
  end
end
return last
