// The config's view of a Redis url; the parsing itself is storage's (storage/redis_url.hpp).
#include "config/config.hpp"
#include "storage/redis_url.hpp"

namespace delayd::broker {

RedisEndpoint parse_redis_url(std::string_view url) {
  const storage::RedisOptions o = storage::parse_redis_url(url);
  return RedisEndpoint{o.host, static_cast<std::uint16_t>(o.port), o.user, o.password, o.db};
}

std::string mask_redis_url(std::string_view url) { return storage::mask_redis_url(url); }

}  // namespace delayd::broker
