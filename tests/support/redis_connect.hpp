// A RedisClient for a REDIS_URL of either form: a RedisConnection for redis://, the slot router
// (RedisCluster) for redis-cluster://, so that tests read Redis the way delayd does.
#pragma once

#include "storage/redis_cluster.hpp"
#include "storage/redis_connection.hpp"
#include "storage/redis_url.hpp"

#include <memory>
#include <string>

namespace delayd::testing {

inline std::unique_ptr<storage::RedisClient> connect_redis(const std::string& url) {
  storage::RedisTarget target = storage::parse_redis_target(url);
  if (!target.is_cluster()) return std::make_unique<storage::RedisConnection>(std::move(target.options));
  storage::RedisClusterOptions o;
  for (const auto& [host, port] : target.cluster_seeds) o.seeds.push_back({host, port});
  o.node = std::move(target.options);
  return std::make_unique<storage::RedisCluster>(std::move(o));
}

}  // namespace delayd::testing
