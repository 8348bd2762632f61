// A RedisClient for a REDIS_URL of either form: a RedisConnection for redis://, the slot router
// (RedisCluster) for redis-cluster://, so that tests read Redis the way delayd does. Over TLS
// (rediss://, redis-cluster+tls://, a stack started with DELAYD_REDIS_TLS=1) the files come from
// the same variables delayd reads (DELAYD_REDIS_TLS_CA_FILE, _CERT_FILE, _KEY_FILE), which
// `scripts/stack.sh env` prints.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "redis/cluster.hpp"
#include "redis/connection.hpp"
#include "redis/url.hpp"

namespace delayd::testing {

// The url's settings, with the stack's TLS files when the url asks for TLS.
inline redis::RedisTarget redis_target(const std::string& url) {
  redis::RedisTarget target = redis::parse_redis_target(url);
  if (target.options.tls.enabled) {
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v == nullptr ? "" : v);
    };
    target.options.tls.ca_file = env("DELAYD_REDIS_TLS_CA_FILE");
    target.options.tls.cert_file = env("DELAYD_REDIS_TLS_CERT_FILE");
    target.options.tls.key_file = env("DELAYD_REDIS_TLS_KEY_FILE");
  }
  return target;
}

inline redis::RedisOptions redis_options(const std::string& url) { return redis_target(url).options; }

inline std::unique_ptr<redis::RedisClient> connect_redis(const std::string& url) {
  redis::RedisTarget target = redis_target(url);
  if (!target.is_cluster()) return std::make_unique<redis::RedisConnection>(std::move(target.options));
  redis::RedisClusterOptions o;
  for (const auto& [host, port] : target.cluster_seeds) o.seeds.push_back({host, port});
  o.node = std::move(target.options);
  return std::make_unique<redis::RedisCluster>(std::move(o));
}

}  // namespace delayd::testing
