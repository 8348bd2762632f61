// Deletes every key under a test's own prefix. For fixture destructors: it never throws, so a
// clean-up failure cannot hide the test's own result.
#pragma once

#include "storage/redis_connection.hpp"

#include <string>

namespace delayd::testing {

inline void delete_prefixed_keys(storage::RedisConnection& redis, const std::string& prefix) noexcept {
  try {
    auto r = redis.command({"KEYS", prefix + ":*"});
    storage::Command del{"DEL"};
    for (size_t i = 0; i < r.view().size(); ++i) del.emplace_back(r.view()[i].str());
    if (del.size() > 1) redis.command(del);
  } catch (...) {
  }
}

}  // namespace delayd::testing
