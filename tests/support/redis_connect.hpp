// A RedisClient for a REDIS_URL of either form: a RedisConnection for redis://, the slot router
// (RedisCluster) for redis-cluster://, so that tests read Redis the way delayd does.
#pragma once

#include <memory>
#include <string>

#include "redis/cluster.hpp"
#include "redis/connection.hpp"
#include "redis/url.hpp"

namespace delayd::testing {

inline std::unique_ptr<redis::RedisClient> connect_redis(const std::string& url) {
  redis::RedisTarget target = redis::parse_redis_target(url);
  if (!target.is_cluster()) return std::make_unique<redis::RedisConnection>(std::move(target.options));
  redis::RedisClusterOptions o;
  for (const auto& [host, port] : target.cluster_seeds) o.seeds.push_back({host, port});
  o.node = std::move(target.options);
  return std::make_unique<redis::RedisCluster>(std::move(o));
}

}  // namespace delayd::testing
