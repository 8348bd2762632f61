// A test's access to a shard's pending set, whose layout is prelude_pending.lua's alone (leaves in windows): each
// helper runs the prelude's own entry_* helpers through EVAL, so no test knows the layout. Throws
// redis::RedisCommandError when Redis answers with an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/client.hpp"
#include "storage/key_schema.hpp"
#include "storage/lua_scripts.hpp"

namespace delayd::testing {

// The EVAL of the prelude (and its begin()) followed by `body` on `shard`, as a batch script without jobs: the
// shard's keys, ARGV[1..4] (now 0, no retention, 0, no fence), then `args` from ARGV[5].
inline redis::Command prelude_eval(const storage::KeySchema& keys, std::string_view shard, std::string_view body,
                                   std::vector<std::string> args) {
  static_assert(storage::lua::kShardKeys == 5 && storage::lua::kFixedArgs == 4);
  redis::Command c{"EVAL",
                   storage::lua::batch_chunk(body),
                   "5",
                   keys.pending(shard),
                   keys.stats(shard),
                   keys.quarantine(shard),
                   keys.in_flight(shard),
                   keys.owner(shard),
                   "0",
                   "0",
                   "0",
                   ""};
  for (auto& a : args) c.push_back(std::move(a));
  return c;
}

inline redis::RedisReply checked(redis::RedisReply r) {
  if (r.view().is_error()) throw redis::RedisCommandError("redis: test's prelude call: " + r.view().error());
  return r;
}

// Puts job_id's pending entry at `score` (epoch ms) and nothing else: no record, as a hand edit
// or a lost record leaves one. Precondition: the job has no entry elsewhere.
inline void put_pending_entry(redis::RedisClient& redis, const storage::KeySchema& keys, std::string_view shard,
                              const std::string& job_id, std::int64_t score) {
  checked(redis.command(prelude_eval(keys, shard, "entry_put(ARGV[5], tonumber(ARGV[6])) flush() return 1",
                                     {job_id, std::to_string(score)})));
}

// Removes job_id's pending entry at `score`, leaving its record as it is; whether it had one.
inline bool drop_pending_entry(redis::RedisClient& redis, const storage::KeySchema& keys, std::string_view shard,
                               const std::string& job_id, std::int64_t score) {
  const auto r = checked(redis.command(
      prelude_eval(keys, shard, "local gone = entry_drop(ARGV[5], tonumber(ARGV[6])) flush() return gone and 1 or 0",
                   {job_id, std::to_string(score)})));
  return r.view().integer() == 1;
}

// Every pending entry of the shard, ascending (by score, then job-id bytes): {job-id, score}.
inline std::vector<std::pair<std::string, std::int64_t>> pending_entries(redis::RedisClient& redis,
                                                                         const storage::KeySchema& keys,
                                                                         std::string_view shard) {
  const auto r =
      checked(redis.command(prelude_eval(keys, shard, "return entries_between(nil, 10 ^ AT_DIGITS, 0)", {})));
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (std::size_t i = 0; i + 1 < r.view().size(); i += 2) {
    out.emplace_back(std::string(r.view()[i].str()), std::stoll(std::string(r.view()[i + 1].str())));
  }
  return out;
}

// The score of job_id's pending entry, if it has one.
inline std::optional<std::int64_t> pending_score_of(redis::RedisClient& redis, const storage::KeySchema& keys,
                                                    std::string_view shard, std::string_view job_id) {
  for (const auto& [id, score] : pending_entries(redis, keys, shard)) {
    if (id == job_id) return score;
  }
  return std::nullopt;
}

// The layout's invariants (prelude_pending.lua, S1 and L1..L3), checked the slow way: every
// window's directory and every leaf read whole, and every key of the shard that looks like a
// window's directory (one the shard's directory of windows does not list breaks S1). Returns one
// line per violation; empty when they all hold. Leaves hold listpacks only while job-ids are at
// most zset-max-listpack-value (64) bytes: `listpacks` asks for that too.
inline std::vector<std::string> pending_leaf_violations(redis::RedisClient& redis, const storage::KeySchema& keys,
                                                        std::string_view shard, bool listpacks = true) {
  static constexpr std::string_view kCheck = R"(
local bad, total, listed = {}, 0, {}
local windows = redis.call('ZRANGE', WINDOWS, 0, -1, 'WITHSCORES')
for q = 1, #windows, 2 do
  local n = windows[q]
  listed[n] = true
  if tonumber(windows[q + 1]) ~= tonumber(n) then bad[#bad + 1] = 'S1: window ' .. n .. ' scored ' .. windows[q + 1] end
  local seps = redis.call('ZRANGE', WINDOW .. n, 0, -1)
  if #seps == 0 then bad[#bad + 1] = 'S1: window ' .. n .. ' is listed and has no leaf' end
  for i, s in ipairs(seps) do
    if window_of(separator_score(s)) ~= tonumber(n) then bad[#bad + 1] = 'S1: leaf ' .. s .. ' in window ' .. n end
    local got = redis.call('ZRANGE', LEAF .. s, 0, -1, 'WITHSCORES')
    local count = #got / 2
    total = total + count
    if count == 0 or count > LEAF_MAX then bad[#bad + 1] = 'L2: leaf ' .. s .. ' holds ' .. count .. ' entries' end
    local enc = redis.call('OBJECT', 'ENCODING', LEAF .. s)
    if count > 0 and ARGV[5] == '1' and enc ~= 'listpack' and enc ~= 'ziplist' then
      bad[#bad + 1] = 'leaf ' .. s .. ' is a ' .. enc
    end
    for k = 1, #got, 2 do
      local key = entry_key(tonumber(got[k + 1]), got[k])
      if bytes_less(key, s) then bad[#bad + 1] = 'L1: ' .. key .. ' is below its leaf ' .. s end
      if seps[i + 1] and not bytes_less(key, seps[i + 1]) then
        bad[#bad + 1] = 'L1: ' .. key .. ' of leaf ' .. s .. ' is not below the next, ' .. seps[i + 1]
      end
      if window_of(tonumber(got[k + 1])) ~= tonumber(n) then bad[#bad + 1] = 'L1: ' .. key .. ' in window ' .. n end
    end
  end
end
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', WINDOW .. '*', 'COUNT', 1000)
  cursor = r[1]
  for _, key in ipairs(r[2]) do
    local n = string.sub(key, #WINDOW + 1)
    if not listed[n] then bad[#bad + 1] = 'S1: window ' .. n .. ' is not listed' end
  end
until cursor == '0'
local size = tonumber(redis.call('GET', SIZE)) or 0
if size ~= total then bad[#bad + 1] = 'L3: size ' .. size .. ', leaves hold ' .. total end
return bad
)";
  const auto r = checked(redis.command(prelude_eval(keys, shard, kCheck, {listpacks ? "1" : "0"})));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < r.view().size(); ++i) out.emplace_back(r.view()[i].str());
  return out;
}

}  // namespace delayd::testing
