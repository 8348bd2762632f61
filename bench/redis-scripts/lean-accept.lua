-- The accept step of a lean delayed-job store, for bench/run-e2e.sh's machine limit: one call
-- takes a batch of ARGV[2] jobs; per job it stores the record (SET NX: the first publish wins),
-- and it files the batch by due time in one ZADD (as storage/lua/accept.lua does). Job numbers
-- come from a counter, so every call writes new keys and the claim and finish steps later walk
-- the same keys in the same order.
--   KEYS[1] counter  KEYS[2] pending sorted set
--   ARGV[1] job key prefix  ARGV[2] jobs per call  ARGV[3] the stored value (240 bytes)
-- Every key carries the same hash tag, so the store would run unchanged on Redis Cluster.
local n = tonumber(ARGV[2])
local last = redis.call('INCRBY', KEYS[1], n)
local scored = {}
for i = last - n + 1, last do
  local id = ARGV[1] .. i
  if redis.call('SET', id, ARGV[3], 'NX') then
    scored[#scored + 1] = 1900000000000 + i
    scored[#scored + 1] = id
  end
end
if #scored > 0 then redis.call('ZADD', KEYS[2], unpack(scored)) end
return last
