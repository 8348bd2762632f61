#include "config/redis_options.hpp"

#include "storage/redis_cluster.hpp"
#include "storage/redis_url.hpp"

namespace delayd::config {

std::unique_ptr<storage::RedisClient> make_redis_client(const Config& config) {
  storage::RedisOptions node = redis_options(config);  // throws ConfigError for a bad url
  const storage::RedisTarget target = storage::parse_redis_target(config.redis.url);
  if (!target.is_cluster()) return std::make_unique<storage::RedisConnection>(std::move(node));
  storage::RedisClusterOptions o;
  for (const auto& [host, port] : target.cluster_seeds) o.seeds.push_back({host, port});
  o.node = std::move(node);
  return std::make_unique<storage::RedisCluster>(std::move(o));
}

}  // namespace delayd::config
