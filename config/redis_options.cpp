#include "config/redis_options.hpp"

#include "redis/cluster.hpp"
#include "redis/url.hpp"

namespace delayd::config {

std::unique_ptr<redis::RedisClient> make_redis_client(const Config& config) {
  redis::RedisOptions node = redis_options(config);  // throws ConfigError for a bad url
  const redis::RedisTarget target = redis::parse_redis_target(config.redis.url);
  if (!target.is_cluster()) return std::make_unique<redis::RedisConnection>(std::move(node));
  redis::RedisClusterOptions o;
  for (const auto& [host, port] : target.cluster_seeds) o.seeds.push_back({host, port});
  o.node = std::move(node);
  return std::make_unique<redis::RedisCluster>(std::move(o));
}

}  // namespace delayd::config
