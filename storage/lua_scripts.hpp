// The Lua scripts that move a job between states. Each touches exactly one key, the job's hash,
// so each is atomic on a single primary and legal under Redis Cluster; the sorted-set updates
// that accompany them are separate commands, ordered as job_store.hpp explains.
//
// Every transition script returns {changed, state, business, shard}: changed is 1 when this call
// moved the job, and state is the state after the call ("missing" when there is no such job).
//
// Threading: immutable texts.
#pragma once

#include <string_view>

namespace delayd::storage::lua {

// KEYS[1] job. ARGV: deliver_at, business, topic, shard, created_at, source, retention_s.
// Creates the job in state delay unless it exists (the job-id is the idempotency key: a second
// publish never overwrites the first). A hash that is only a remembered cancel (see kCancel)
// is filled in with the job's fields and stays cancelled: created = 2, "arrived after its
// cancel". Returns {created, state, business, shard, deliver_at}.
inline constexpr std::string_view kAccept = R"lua(
local cur = redis.call('HMGET', KEYS[1], 'state', 'business', 'shard', 'deliver_at', 'cancelled_early')
if cur[1] and cur[5] and not cur[4] then
  redis.call('HSET', KEYS[1], 'deliver_at', ARGV[1], 'business', ARGV[2], 'topic', ARGV[3], 'shard', ARGV[4],
    'created_at', ARGV[5], 'source', ARGV[6], 'attempt', '0')
  if tonumber(ARGV[7]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[7]) else redis.call('PERSIST', KEYS[1]) end
  return {2, cur[1], ARGV[2], ARGV[4], ARGV[1]}
end
if cur[1] then return {0, cur[1], cur[2] or '', cur[3] or '', cur[4] or '0'} end
redis.call('HSET', KEYS[1], 'state', 'delay', 'deliver_at', ARGV[1], 'business', ARGV[2],
  'topic', ARGV[3], 'shard', ARGV[4], 'created_at', ARGV[5], 'source', ARGV[6], 'attempt', '0')
return {1, 'delay', ARGV[2], ARGV[4], ARGV[1]}
)lua";

// KEYS[1] job. ARGV: now, retention_s. Takes a due job for delivery: counts the attempt and
// stamps firing_at, which from here on makes a cancel answer "in_flight" (the record may already
// be on its way). Returns {'deliver', deliver_at, topic, business, shard, attempt},
// {'early', deliver_at} when the caller's clock says it is not yet due (never early, enforced
// here as well as in the wheel), {state} when the job is no longer deliverable ('missing' when
// there is no hash), or {'corrupt', reason, business, shard} when a field the delivery needs
// cannot be read: the script then marks the job failed with error "corrupt job record: ...",
// so one bad hash is set aside once instead of failing every claim that meets it. The payload
// is read beside it, in the same round trip (a different key, so not inside the script).
inline constexpr std::string_view kClaim = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'deliver_at', 'topic', 'business', 'shard', 'attempt')
if not f[1] then return {'missing'} end
if f[1] == 'ready' or f[1] == 'cancelled' or f[1] == 'failed' then return {f[1]} end
local function show(v) if v then return "'" .. string.sub(v, 1, 64) .. "'" end return 'absent' end
local function int(v) local n = tonumber(v) return n and n == math.floor(n) and n >= 0 and n < 2^53 and n or nil end
local at = int(f[2])
local why
if f[1] ~= 'delay' then why = 'state is not one delayd writes: ' .. show(f[1])
elseif not at then why = 'deliver_at is not an integer: ' .. show(f[2])
elseif not f[3] or f[3] == '' then why = 'topic is missing'
elseif f[6] and not int(f[6]) then why = 'attempt is not an integer: ' .. show(f[6])
end
if why then
  why = 'corrupt job record: ' .. why
  redis.call('HSET', KEYS[1], 'state', 'failed', 'failed_at', ARGV[1], 'error', why)
  redis.call('HDEL', KEYS[1], 'firing_at')
  if tonumber(ARGV[2]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
  return {'corrupt', why, f[4] or '', f[5] or ''}
end
if at > tonumber(ARGV[1]) then return {'early', string.format('%.0f', at)} end
local attempt = redis.call('HINCRBY', KEYS[1], 'attempt', 1)
redis.call('HSET', KEYS[1], 'firing_at', ARGV[1])
return {'deliver', string.format('%.0f', at), f[3], f[4] or '', f[5] or '', attempt}
)lua";

// KEYS[1] job. ARGV: now, retention_s. After Kafka acknowledged the ready record.
inline constexpr std::string_view kMarkReady = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'business', 'shard')
if f[1] ~= 'delay' then return {0, f[1] or 'missing', f[2] or '', f[3] or ''} end
redis.call('HSET', KEYS[1], 'state', 'ready', 'ready_at', ARGV[1])
redis.call('HDEL', KEYS[1], 'firing_at', 'last_error')
if tonumber(ARGV[2]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return {1, 'ready', f[2], f[3]}
)lua";

// KEYS[1] job. ARGV: error, refund, keep_firing. A delivery attempt failed and will be retried.
// refund = 1: the attempt does not count (Kafka never answered it with a permanent error: an
// outage, a timeout, a full queue), so `attempt` goes back down. keep_firing = 1: the record may
// have been written ("possibly persisted"), so firing_at stays and a cancel keeps answering
// in_flight until a later attempt settles the job; otherwise a cancel may win again.
inline constexpr std::string_view kRelease = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'business', 'shard', 'attempt')
if f[1] ~= 'delay' then return {0, f[1] or 'missing', f[2] or '', f[3] or ''} end
if ARGV[3] ~= '1' then redis.call('HDEL', KEYS[1], 'firing_at') end
if ARGV[2] == '1' and tonumber(f[4] or '0') and tonumber(f[4] or '0') > 0 then
  redis.call('HINCRBY', KEYS[1], 'attempt', -1)
end
redis.call('HSET', KEYS[1], 'last_error', ARGV[1])
return {1, 'delay', f[2], f[3]}
)lua";

// KEYS[1] job. ARGV: now, reason, retention_s. Attempts exhausted.
inline constexpr std::string_view kMarkFailed = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'business', 'shard')
if f[1] ~= 'delay' then return {0, f[1] or 'missing', f[2] or '', f[3] or ''} end
redis.call('HSET', KEYS[1], 'state', 'failed', 'failed_at', ARGV[1], 'error', ARGV[2])
redis.call('HDEL', KEYS[1], 'firing_at')
if tonumber(ARGV[3]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return {1, 'failed', f[2], f[3]}
)lua";

// KEYS[1] job. ARGV: now, retention_s, remember_s. Cancels a job that is pending and not in
// flight. Returns state 'in_flight' (unchanged) when a delivery attempt is under way. For an id
// with no hash (its job may be on another partition, not read yet) and remember_s > 0, the
// cancel is remembered: a hash {state cancelled, cancelled_at, cancelled_early 1} that expires
// after remember_s, which kAccept turns into the cancelled job if the job arrives in time.
// Returns {0, 'missing'} then too (no job was cancelled yet).
inline constexpr std::string_view kCancel = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'business', 'shard', 'firing_at')
if not f[1] then
  if tonumber(ARGV[3]) > 0 then
    redis.call('HSET', KEYS[1], 'state', 'cancelled', 'cancelled_at', ARGV[1], 'cancelled_early', '1')
    redis.call('EXPIRE', KEYS[1], ARGV[3])
  end
  return {0, 'missing', '', ''}
end
if f[1] ~= 'delay' then return {0, f[1], f[2] or '', f[3] or ''} end
if f[4] then return {0, 'in_flight', f[2] or '', f[3] or ''} end
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'cancelled_at', ARGV[1])
if tonumber(ARGV[2]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return {1, 'cancelled', f[2] or '', f[3] or ''}
)lua";

}  // namespace delayd::storage::lua
