// Deletes every key under a test's own prefix. For fixture destructors: it never throws, so a
// clean-up failure cannot hide the test's own result.
// SCAN (never KEYS, which blocks the server), on every primary of a cluster; the keys are then
// deleted one command each, pipelined, so that no command spans two hash slots.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "redis/client.hpp"
#include "redis/cluster.hpp"

namespace delayd::testing {

// Every key matching `pattern`, from every primary.
inline std::vector<std::string> scan_keys(redis::RedisClient& redis, const std::string& pattern) {
  std::vector<std::string> keys;
  auto scan_with = [&](const std::function<redis::RedisReply(const redis::Command&)>& send) {
    std::string cursor = "0";
    do {
      auto r = send({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
      cursor = std::string(r.view()[0].str());
      for (size_t i = 0; i < r.view()[1].size(); ++i) keys.emplace_back(r.view()[1][i].str());
    } while (cursor != "0");
  };
  if (auto* cluster = dynamic_cast<redis::RedisCluster*>(&redis)) {
    for (const auto& node : cluster->primaries()) {
      scan_with([&](const redis::Command& c) { return cluster->command_on(node, c); });
    }
  } else {
    scan_with([&](const redis::Command& c) { return redis.command(c); });
  }
  return keys;
}

inline void delete_prefixed_keys(redis::RedisClient& redis, const std::string& prefix) noexcept {
  try {
    std::vector<redis::Command> dels;
    for (auto& k : scan_keys(redis, prefix + ":*")) dels.push_back({"UNLINK", std::move(k)});
    if (!dels.empty()) redis.pipeline(dels);
  } catch (...) {
  }
}

}  // namespace delayd::testing
