#include "redis/connection.hpp"

#include <sys/time.h>

#include <stdexcept>

#include "redis/tls.hpp"

namespace delayd::redis {

namespace {

// A command's arguments as hiredis takes them (pointers and lengths, valid while cmd lives).
struct Argv {
  std::vector<const char*> args;
  std::vector<size_t> lens;
  void set(const Command& cmd) {
    args.clear();
    lens.clear();
    for (const auto& a : cmd) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  int count() const { return static_cast<int>(args.size()); }
};

timeval to_timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

}  // namespace

RedisConnection::RedisConnection(RedisOptions options) : options_(std::move(options)) { ensure_connected(); }
RedisConnection::~RedisConnection() = default;
RedisConnection::RedisConnection(RedisConnection&&) noexcept = default;

void RedisConnection::fail(const std::string& what) {
  std::string msg = "redis " + options_.host + ":" + std::to_string(options_.port) + ": " + what;
  if (ctx_ && ctx_->err) msg += ": " + std::string(ctx_->errstr);
  ctx_.reset();  // a broken context cannot be trusted for the next exchange
  tls_.reset();
  reader_.reset();
  throw RedisIoError(msg);
}

void RedisConnection::connect_tls() {
  if (!tls_context_) {
    try {
      tls_context_ = std::make_unique<TlsContext>(options_.tls);
    } catch (const TlsSetupError& e) {
      // Checked when the configuration was loaded; a file changed since. Retried like an outage.
      throw RedisIoError("redis " + options_.host + ":" + std::to_string(options_.port) + ": " + e.what());
    }
  }
  tls_ = std::make_unique<TlsStream>(*tls_context_, options_.host, options_.port,
                                     std::chrono::milliseconds(options_.timeout_ms));
  reader_.reset(redisReaderCreate());
  if (!reader_) fail("out of memory allocating a reply reader");
}

void RedisConnection::ensure_connected() {
  if (connected()) return;
  auto checked = [this](const Command& argv, const char* what) {
    RedisReply r = command(argv);  // a transient refusal (LOADING) throws RedisIoError
    if (r.view().is_error()) {
      const std::string err = r.view().error();
      ctx_.reset();
      tls_.reset();
      throw RedisCommandError("redis " + options_.host + ":" + std::to_string(options_.port) + ": " + what +
                              " refused: " + err);
    }
  };
  if (options_.tls.enabled) {
    connect_tls();
  } else {
    connect_plain();
  }
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      checked({"AUTH", options_.password}, "AUTH");
    } else {
      checked({"AUTH", options_.user, options_.password}, "AUTH");
    }
  }
  if (options_.db != 0) checked({"SELECT", std::to_string(options_.db)}, "SELECT");
}

void RedisConnection::connect_plain() {
  const timeval tv = to_timeval(options_.timeout_ms);
  ctx_.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port, tv));
  if (!ctx_) throw RedisIoError("redis: out of memory allocating a context");
  if (ctx_->err) fail("cannot connect");
  redisSetTimeout(ctx_.get(), tv);
  redisEnableKeepAlive(ctx_.get());
}

RedisReply RedisConnection::command(const Command& argv) {
  auto replies = pipeline({argv});
  return std::move(replies.front());
}

// The replies of a round trip, checked for the transient refusals (see the header).
std::vector<RedisReply> RedisConnection::pipeline(const std::vector<Command>& commands) {
  ensure_connected();
  std::vector<RedisReply> replies = tls_ ? pipeline_tls(commands) : pipeline_plain(commands);
  for (const auto& r : replies) {
    if (r.view().is_error() && is_transient_error_reply(r.view().error())) {
      const std::string err = r.view().error();
      ctx_.reset();  // after a failover the next connection may reach the new primary
      tls_.reset();
      throw RedisIoError("redis " + options_.host + ":" + std::to_string(options_.port) + ": " + err);
    }
  }
  return replies;
}

std::vector<RedisReply> RedisConnection::pipeline_plain(const std::vector<Command>& commands) {
  Argv argv;
  for (const auto& cmd : commands) {
    argv.set(cmd);
    if (redisAppendCommandArgv(ctx_.get(), argv.count(), argv.args.data(), argv.lens.data()) != REDIS_OK) {
      fail("cannot queue a command");
    }
  }
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) fail("connection lost");
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  return replies;
}

// The same exchange over TLS: hiredis formats every command into one buffer, the stream writes
// it, and hiredis's reader parses what the stream reads until every reply is complete.
std::vector<RedisReply> RedisConnection::pipeline_tls(const std::vector<Command>& commands) {
  try {
    return exchange_tls(commands);
  } catch (const RedisIoError&) {
    tls_.reset();  // a broken session cannot be trusted for the next exchange
    reader_.reset();
    throw;
  }
}

std::vector<RedisReply> RedisConnection::exchange_tls(const std::vector<Command>& commands) {
  std::string out;
  Argv argv;
  for (const auto& cmd : commands) {
    argv.set(cmd);
    char* formatted = nullptr;
    const long long n = redisFormatCommandArgv(&formatted, argv.count(), argv.args.data(), argv.lens.data());
    if (n < 0 || formatted == nullptr) fail("cannot format a command");
    out.append(formatted, static_cast<std::size_t>(n));
    redisFreeCommand(formatted);
  }
  tls_->write_all(out);
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  char buf[16 * 1024];
  while (replies.size() < commands.size()) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      fail(std::string("protocol error: ") + reader_->errstr);
    }
    if (raw != nullptr) {
      replies.emplace_back(static_cast<redisReply*>(raw));
      continue;
    }
    const std::size_t got = tls_->read_some(buf, sizeof buf);
    if (redisReaderFeed(reader_.get(), buf, got) != REDIS_OK) fail("cannot buffer a reply");
  }
  return replies;
}

void RedisConnection::wait_replicas(int replicas, int timeout_ms) {
  if (replicas <= 0) return;
  RedisReply r = command({"WAIT", std::to_string(replicas), std::to_string(timeout_ms)});
  const ReplyView v = r.view();
  if (v.is_integer() && v.integer() >= replicas) return;
  throw RedisIoError(
      "redis " + options_.host + ":" + std::to_string(options_.port) + ": WAIT " + std::to_string(replicas) + ": " +
      (v.is_integer()
           ? std::to_string(v.integer()) + " replicas acknowledged within " + std::to_string(timeout_ms) + " ms"
       : v.is_error() ? v.error()
                      : std::string("unexpected reply")));
}

}  // namespace delayd::redis
