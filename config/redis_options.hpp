// The Redis connection settings of a loaded Config, in the form storage takes them.
// Threading: redis_options() and script_calls() are pure functions; make_redis_client() connects to Redis.
#pragma once

#include <memory>

#include "config/config.hpp"
#include "redis/connection.hpp"
#include "storage/job_store.hpp"

namespace delayd::config {

// The connection settings of redis.url (for a cluster, its first seed), with redis.password
// and redis.db overriding the url's and redis.timeout_ms. Throws ConfigError for a url that
// does not parse (validate_config() has refused it already in a loaded Config).
// Defined in config.cpp, beside the other ConfigError messages.
redis::RedisOptions redis_options(const Config& config);

// The client for config.redis.url: a RedisConnection for redis://, a RedisCluster (slot router)
// for redis-cluster://. Connects at once (throws redis::RedisIoError when the
// server cannot be reached, RedisCommandError when it refuses AUTH or SELECT).
std::unique_ptr<redis::RedisClient> make_redis_client(const Config& config);

// How a JobStore of this config calls its scripts: redis.functions.
inline storage::ScriptCalls script_calls(const Config& config) {
  return config.redis.functions ? storage::ScriptCalls::functions : storage::ScriptCalls::eval;
}

}  // namespace delayd::config
