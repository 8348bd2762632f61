-- op_lease: takes or renews the lease of one bulk operation (storage/operation_store.hpp). Not a
-- batch script and not after the prelude. KEYS[1] the operation's lease key; ARGV[1] the
-- member asking ("<host>/<pid>"), ARGV[2] the lease's length in ms, ARGV[3] '1' to give it up.
-- The lease is the caller's when it is free (expired, or never taken) or already the caller's;
-- then it is set (or renewed) for ARGV[2] ms, or deleted when given up. Returns 1 if the caller
-- holds it now (0 after giving it up), 0 if another member does.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
