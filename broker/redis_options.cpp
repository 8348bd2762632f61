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

}  // namespace delayd::broker
