// Redis addresses as people write them: redis://[[user]:password@]host[:port][/db] for one
// server, redis-cluster://[[user]:password@]host[:port][,host[:port]...][/0] for a Redis Cluster
// (the hosts are seeds: any nodes of the cluster; the slot map is read from them; db 0 only).
// rediss:// and redis-cluster+tls:// are the same over TLS: options.tls.enabled is set, and the
// caller adds the rest of TlsOptions (files, verification name) from its own settings.
// user and password are percent-decoded (a password with '@' or ':' is written %40 / %3A); an
// IPv6 host is written in brackets. "redis://secret@host" is refused as ambiguous.
// Errors are std::invalid_argument with a short reason that never contains the password.
// Threading: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/connection.hpp"

namespace delayd::redis {

struct RedisTarget {
  RedisOptions options;                                    // for a cluster: the first seed
  std::vector<std::pair<std::string, int>> cluster_seeds;  // empty: one server (redis://)
  bool is_cluster() const { return !cluster_seeds.empty(); }
};

// Either form of url; timeout_ms keeps its default.
RedisTarget parse_redis_target(std::string_view url);
// The connection settings named by the url (either form; for a cluster, those of its first
// seed); timeout_ms keeps its default.
RedisOptions parse_redis_url(std::string_view url);
// The url with its password, if any, replaced by "***"; for logs. Works on any text.
std::string mask_redis_url(std::string_view url);

}  // namespace delayd::redis
