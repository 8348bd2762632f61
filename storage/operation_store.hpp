// OperationStore: the bulk operations of the console (POST /jobs/bulk; admin/operation_runner.hpp
// runs them) as Redis keeps them, so that an operation outlives the instance that runs it:
//
//   <prefix>:ops             zset    operation ids by creation time (epoch ms)
//   <prefix>:op:<id>         hash    the operation: what it does and how far it got (Field)
//   <prefix>:op:<id>:lease   string  "<host>/<pid>" of the instance running it; expires unless
//                                    renewed (op_lease.lua), so another instance takes over
//
// Written once per batch of jobs, as one HSET of the progress and the walk's cursor together: a
// restart resumes from the last batch written. Applying a batch again is harmless (every action
// applies only to a job still in the state it is for, JobStore::act()), so no job is acted on
// twice; the counts of a batch cut short by a crash may fall short by that batch.
// An operation that ended expires after kKeepEnded; the list forgets it then too.
// Threading: one thread at a time, like the connection it uses.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection.hpp"
#include "storage/key_schema.hpp"

namespace delayd::storage {

class OperationStore {
 public:
  // How long an ended operation (done, stopped) stays readable.
  static constexpr std::chrono::hours kKeepEnded{7 * 24};
  // The operations `list()` returns at most.
  static constexpr std::size_t kListMax = 100;

  using Fields = std::map<std::string, std::string>;

  OperationStore(redis::RedisClient& redis, const KeySchema& keys);

  // A new operation with these fields; returns its id (16 hex digits, random). Two round trips.
  std::string create(const Fields& fields, std::int64_t now_ms);
  // Its fields; nullopt when there is none (never was, or expired).
  std::optional<Fields> load(const std::string& id);
  // Sets these fields (the others stay). One round trip.
  void save(const std::string& id, const Fields& fields);
  // The operation ended: its keys expire after kKeepEnded.
  void ended(const std::string& id);
  // The newest operations' ids, newest first (at most kListMax).
  std::vector<std::string> list();
  // Takes or renews the lease for `ttl` (true: the caller holds it), or gives it up (give_up).
  bool lease(const std::string& id, const std::string& member, std::chrono::milliseconds ttl, bool give_up = false);

 private:
  redis::RedisClient& redis_;
  KeySchema keys_;
};

}  // namespace delayd::storage
