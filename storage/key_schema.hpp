// The names of every Redis key delayd writes. README's "Keys in Redis" section mirrors this file.
//
//   <prefix>:job:<job-id>          hash   one job: state, deliver_at, topic, timestamps
//   <prefix>:payload:<job-id>      string the job's key, value and headers (header_codec.hpp),
//                                         from accept until the job is finished
//   <prefix>:{<shard>}:pending     zset   the shard's jobs not yet delivered, scored by deliver_at
//   <prefix>:{<shard>}:quarantine  hash   job-id -> reason, for pending entries of the shard that
//                                         pointed at no readable job hash and were moved aside
//   <prefix>:shards                set    every shard that ever held a job (for stats and tools)
//   <prefix>:stats                 hash   counters "<business>|<state>" (see job_store.hpp)
//
// A shard is one partition of the ingest topic, named "<topic>:<partition>". Its keys carry the
// shard in a hash tag so that under Redis Cluster they share a slot; a job hash lives in its own
// slot, which is why no script ever touches a job hash and a sorted set together. The payload
// is kept apart from the hash so that the hash stays small enough for Redis's compact
// encoding (a field over 64 bytes turns a whole hash into a hashtable, about 3x the memory).
//
// Invariant: the prefix matches [A-Za-z0-9._-]+ (the config checks it), so the first "{...}" in a
// shard key is always the shard's hash tag.
// Threading: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace delayd::storage {

inline std::string shard_id(std::string_view topic, std::int32_t partition) {
  return std::string(topic) + ":" + std::to_string(partition);
}

class KeySchema {
 public:
  explicit KeySchema(std::string prefix) : prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }
  std::string job(std::string_view job_id) const { return prefix_ + ":job:" + std::string(job_id); }
  std::string payload(std::string_view job_id) const { return prefix_ + ":payload:" + std::string(job_id); }
  std::string pending(std::string_view shard) const { return prefix_ + ":{" + std::string(shard) + "}:pending"; }
  std::string quarantine(std::string_view shard) const {
    return prefix_ + ":{" + std::string(shard) + "}:quarantine";
  }
  std::string shards() const { return prefix_ + ":shards"; }
  std::string stats() const { return prefix_ + ":stats"; }

 private:
  std::string prefix_;
};

}  // namespace delayd::storage
