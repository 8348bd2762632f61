// RedisConnection: one synchronous hiredis connection (RAII over redisContext) with pipelining.
//
// Every round trip either returns all replies or throws RedisIoError and leaves the connection
// closed (forgetting every outstanding post()); the next call reconnects first. Callers
// therefore treat RedisIoError as "retry the whole operation later", which is safe because
// every delayd write is idempotent.
// RedisIoError means "transient": besides a lost connection it is thrown when any reply of a
// round trip is one of the error replies that say "not now" (LOADING after a restart, READONLY
// after a failover, OOM, MISCONF, BUSY, ...; see is_transient_error_reply). Other error replies
// are returned as replies (callers decide), never thrown here.
//
// Over TLS (RedisOptions::tls.enabled, from a rediss:// url) the bytes go through a TlsStream
// (redis/tls.hpp) instead of hiredis's socket; hiredis still encodes the commands and parses the
// replies, and every contract above holds the same.
// Threading: a connection is used by one thread at a time (hiredis contexts are not thread-safe).
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "redis/client.hpp"
#include "redis/reply.hpp"

namespace delayd::redis {

class TlsContext;
class TlsStream;

// The server could not be reached, the connection broke mid-exchange, or the server said it
// cannot serve now (a transient error reply). Retry later.
struct RedisIoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// WAIT: fewer replicas acknowledged the writes than asked within the timeout. The server
// answered; what it holds is not yet on enough replicas. Retry later, as any RedisIoError.
struct RedisNotDurable : RedisIoError {
  using RedisIoError::RedisIoError;
};

// TLS to the server (rediss://, redis-cluster+tls://). Files are PEM. An empty ca_file trusts the
// system's certificate store; an empty server_name verifies (and sends as SNI) the host.
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;
  std::string cert_file;  // client certificate, for servers that require one (with key_file)
  std::string key_file;
  std::string server_name;  // the name the server's certificate must carry; empty: the host
  bool verify = true;       // false: any certificate is accepted (testing only)
  bool operator==(const TlsOptions&) const = default;
};

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // empty: AUTH with password only (Redis < 6 style)
  std::string password;  // empty: no AUTH
  int db = 0;
  int timeout_ms = 2000;  // connect and per-command timeout
  TlsOptions tls;
  bool operator==(const RedisOptions&) const = default;
};

class RedisConnection final : public RedisClient {
 public:
  // Connects at once so that a wrong address fails at start-up, not at the first job.
  // Throws RedisIoError (unreachable) or RedisCommandError (AUTH/SELECT refused).
  explicit RedisConnection(RedisOptions options);
  ~RedisConnection() override;
  RedisConnection(RedisConnection&&) noexcept;

  // One command, one round trip. An error reply is returned, not thrown.
  RedisReply command(const Command& argv) override;
  // command(): one server, one reply.
  std::vector<RedisReply> command_on_every_server(const Command& argv) override;
  // All commands written, then all replies read: one round trip for the batch.
  // Postcondition: result.size() == commands.size(), in order.
  std::vector<RedisReply> pipeline(const std::vector<Command>& commands) override;
  // WAIT replicas timeout_ms; RedisIoError when fewer replicas acknowledge.
  void wait_replicas(int replicas, int timeout_ms) override;
  // The commands written to the socket (or the TLS session) before it returns; their replies
  // wait in the socket until collect(). Redis reads and runs them meanwhile.
  void post(const std::vector<Command>& commands) override;
  std::vector<RedisReply> collect() override;
  void abandon() noexcept override;

  const RedisOptions& options() const { return options_; }
  bool connected() const { return ctx_ != nullptr || tls_ != nullptr; }

 private:
  void ensure_connected();
  void connect_plain();
  void connect_tls();
  void post_plain(const std::vector<Command>& commands);
  void post_tls(const std::vector<Command>& commands);
  std::vector<RedisReply> collect_plain(std::size_t count);
  std::vector<RedisReply> collect_tls(std::size_t count);
  // Closes the connection and forgets what was posted.
  void drop() noexcept;
  // Throws std::logic_error if a post() is outstanding (`what` names the call).
  void require_idle(const char* what) const;
  [[noreturn]] void fail(const std::string& what);

  struct Free {
    void operator()(redisContext* c) const { redisFree(c); }
    void operator()(redisReader* r) const { redisReaderFree(r); }
  };
  RedisOptions options_;
  std::unique_ptr<redisContext, Free> ctx_;  // plain TCP: hiredis's own socket
  // TLS: the context (built once, on first connect), the session, and the reply parser.
  std::unique_ptr<TlsContext> tls_context_;
  std::unique_ptr<TlsStream> tls_;
  std::unique_ptr<redisReader, Free> reader_;
  // Per outstanding post(), oldest first: how many replies it is owed.
  std::deque<std::size_t> posted_;
};

}  // namespace delayd::redis
