-- Not a batch script: KEYS[1] the shard's owner key, KEYS[2] its wake list, ARGV[1] the member
-- taking it (no spaces), ARGV[2] now. Makes the caller the shard's owner with the next epoch and returns that epoch.
-- A missing owner key starts at epoch 1. Deleting or hand-editing the key breaks the order of
-- epochs (a stale member might hold the new number): never do it while brokers run.
local old = redis.call('GET', KEYS[1])
local epoch = (old and tonumber(string.match(old, '^(%d+)')) or 0) + 1
redis.call('SET', KEYS[1], string.format('%.0f', epoch) .. ' ' .. ARGV[1] .. ' ' .. ARGV[2])
-- The new owner loads the whole pending set: what the wake list says is in it already.
redis.call('DEL', KEYS[2])
return epoch
