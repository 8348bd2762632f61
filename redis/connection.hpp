// RedisConnection: one synchronous hiredis connection (RAII over redisContext) with pipelining.
//
// Every round trip either returns all replies or throws RedisIoError and leaves the connection
// closed; the next call reconnects first. Callers therefore treat RedisIoError as "retry the
// whole operation later", which is safe because every delayd write is idempotent.
// RedisIoError means "transient": besides a lost connection it is thrown when any reply of a
// round trip is one of the error replies that say "not now" (LOADING after a restart, READONLY
// after a failover, OOM, MISCONF, BUSY, ...; see is_transient_error_reply). Other error replies
// are returned as replies (callers decide), never thrown here.
//
// Threading: a connection is used by one thread at a time (hiredis contexts are not thread-safe).
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "redis/client.hpp"
#include "redis/reply.hpp"

namespace delayd::redis {

// The server could not be reached, the connection broke mid-exchange, or the server said it
// cannot serve now (a transient error reply). Retry later.
struct RedisIoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // empty: AUTH with password only (Redis < 6 style)
  std::string password;  // empty: no AUTH
  int db = 0;
  int timeout_ms = 2000;  // connect and per-command timeout
  bool operator==(const RedisOptions&) const = default;
};

class RedisConnection final : public RedisClient {
 public:
  // Connects at once so that a wrong address fails at start-up, not at the first job.
  // Throws RedisIoError (unreachable) or RedisCommandError (AUTH/SELECT refused).
  explicit RedisConnection(RedisOptions options);

  // One command, one round trip. An error reply is returned, not thrown.
  RedisReply command(const Command& argv) override;
  // All commands written, then all replies read: one round trip for the batch.
  // Postcondition: result.size() == commands.size(), in order.
  std::vector<RedisReply> pipeline(const std::vector<Command>& commands) override;
  // WAIT replicas timeout_ms; RedisIoError when fewer replicas acknowledge.
  void wait_replicas(int replicas, int timeout_ms) override;

  const RedisOptions& options() const { return options_; }
  bool connected() const { return ctx_ != nullptr; }

 private:
  void ensure_connected();
  [[noreturn]] void fail(const std::string& what);

  struct Free {
    void operator()(redisContext* c) const { redisFree(c); }
  };
  RedisOptions options_;
  std::unique_ptr<redisContext, Free> ctx_;
};

}  // namespace delayd::redis
