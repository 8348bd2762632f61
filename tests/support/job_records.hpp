// A test's access to a shard's job records, whose place is the layout's (key_schema.hpp: a delay
// job's record in the shard's hash of delay records, any other in a key of its own): each
// helper runs the prelude's own read() or places the record by the same rule, so no test
// hard-codes where a record is. Throws redis::RedisCommandError when Redis answers with an error.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/client.hpp"
#include "storage/key_schema.hpp"
#include "support/pending_entries.hpp"

namespace delayd::testing {

// job_id's record as a script reads it (the shard's hash, else its key); nullopt when it has none.
inline std::optional<std::string> record_of(redis::RedisClient& redis, const storage::KeySchema& keys,
                                            std::string_view shard, const std::string& job_id) {
  const auto r = checked(redis.command(prelude_eval(keys, shard, "return read(job_key(ARGV[5]))", {job_id})));
  if (!r.view().is_string()) return std::nullopt;
  return std::string(r.view().str());
}

// Writes `record` for job_id by hand, where the layout keeps a record whose first word is its
// state: a record starting "delay " in the shard's hash, any other (a damaged one too) in the
// job's key; the other place is cleared. No index or entry is touched.
inline void put_record(redis::RedisClient& redis, const storage::KeySchema& keys, std::string_view shard,
                       const std::string& job_id, const std::string& record) {
  checked(redis.command(prelude_eval(keys, shard,
                                     "local id, v = ARGV[5], ARGV[6]\n"
                                     "if string.sub(v, 1, 6) == 'delay ' then\n"
                                     "  redis.call('HSET', JOBS, id, v) redis.call('DEL', job_key(id))\n"
                                     "else\n"
                                     "  redis.call('SET', job_key(id), v) redis.call('HDEL', JOBS, id)\n"
                                     "end\n"
                                     "return 1",
                                     {job_id, record})));
}

// The ids of every job of the shard that has a record (the hash's fields, then the keys' ids;
// a test's own prefix, so KEYS reads a few keys).
inline std::vector<std::string> record_ids(redis::RedisClient& redis, const storage::KeySchema& keys,
                                           std::string_view shard) {
  std::vector<std::string> out;
  const auto fields = checked(redis.command({"HKEYS", keys.delay_records(shard)}));
  for (std::size_t i = 0; i < fields.view().size(); ++i) out.emplace_back(fields.view()[i].str());
  const std::string prefix = keys.job(shard, "");
  const auto names = checked(redis.command({"KEYS", prefix + "*"}));
  for (std::size_t i = 0; i < names.view().size(); ++i) out.emplace_back(names.view()[i].str().substr(prefix.size()));
  return out;
}

}  // namespace delayd::testing
