#include "broker/redis_options.hpp"

namespace delayd::broker {

storage::RedisOptions redis_options(const Config& config) {
  const RedisEndpoint e = config.redis_endpoint();
  storage::RedisOptions o;
  o.host = e.host;
  o.port = e.port;
  o.user = e.user;
  o.password = e.password;
  o.db = static_cast<int>(e.db);
  o.timeout_ms = static_cast<int>(config.redis.timeout_ms);
  return o;
}

std::unique_ptr<storage::RedisClient> make_redis_client(const Config& config) {
  return std::make_unique<storage::RedisConnection>(redis_options(config));
}

}  // namespace delayd::broker
