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
  drop();  // a broken context cannot be trusted for the next exchange
  throw RedisIoError(msg);
}

void RedisConnection::drop() noexcept {
  ctx_.reset();
  tls_.reset();
  reader_.reset();
  posted_.clear();
}

void RedisConnection::require_idle(const char* what) const {
  if (!posted_.empty()) {
    throw std::logic_error(std::string("redis: ") + what + " while " + std::to_string(posted_.size()) +
                           " post() calls wait to be collected");
  }
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

// One round trip: a post() collected at once.
std::vector<RedisReply> RedisConnection::pipeline(const std::vector<Command>& commands) {
  require_idle("pipeline()");
  post(commands);
  return collect();
}

void RedisConnection::post(const std::vector<Command>& commands) {
  ensure_connected();
  try {
    if (tls_) {
      post_tls(commands);
    } else {
      post_plain(commands);
    }
  } catch (const RedisIoError&) {
    drop();  // a TLS stream throws on its own; a half-written post leaves the stream unusable
    throw;
  }
  posted_.push_back(commands.size());
}

// The replies of the earliest post, checked for the transient refusals (see the header).
std::vector<RedisReply> RedisConnection::collect() {
  if (posted_.empty()) throw std::logic_error("redis: collect() without a post()");
  const std::size_t count = posted_.front();
  std::vector<RedisReply> replies;
  try {
    replies = tls_ ? collect_tls(count) : collect_plain(count);
  } catch (const RedisIoError&) {
    drop();
    throw;
  }
  posted_.pop_front();
  for (const auto& r : replies) {
    if (r.view().is_error() && is_transient_error_reply(r.view().error())) {
      const std::string err = r.view().error();
      drop();  // after a failover the next connection may reach the new primary
      throw RedisIoError("redis " + options_.host + ":" + std::to_string(options_.port) + ": " + err);
    }
  }
  return replies;
}

void RedisConnection::abandon() noexcept {
  if (!posted_.empty()) drop();
}

void RedisConnection::post_plain(const std::vector<Command>& commands) {
  Argv argv;
  for (const auto& cmd : commands) {
    argv.set(cmd);
    if (redisAppendCommandArgv(ctx_.get(), argv.count(), argv.args.data(), argv.lens.data()) != REDIS_OK) {
      fail("cannot queue a command");
    }
  }
  // Written now (the socket blocks until it took everything, or the timeout), not at the
  // first read: Redis runs the commands while the caller does other work.
  for (int done = 0; done == 0;) {
    if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) fail("cannot send");
  }
}

std::vector<RedisReply> RedisConnection::collect_plain(std::size_t count) {
  std::vector<RedisReply> replies;
  replies.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) fail("connection lost");
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  return replies;
}

// Over TLS: hiredis formats every command into one buffer, the stream writes it; hiredis's
// reader parses what the stream reads until every reply owed is complete (bytes of a later
// post's replies stay in the reader for its collect()).
void RedisConnection::post_tls(const std::vector<Command>& commands) {
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
}

std::vector<RedisReply> RedisConnection::collect_tls(std::size_t count) {
  std::vector<RedisReply> replies;
  replies.reserve(count);
  char buf[16 * 1024];
  while (replies.size() < count) {
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

std::vector<RedisReply> RedisConnection::command_on_every_server(const Command& argv) {
  std::vector<RedisReply> out;
  out.push_back(command(argv));
  return out;
}

void RedisConnection::wait_replicas(int replicas, int timeout_ms) {
  require_idle("wait_replicas()");
  if (replicas <= 0) return;
  RedisReply r = command({"WAIT", std::to_string(replicas), std::to_string(timeout_ms)});
  const ReplyView v = r.view();
  if (v.is_integer() && v.integer() >= replicas) return;
  const std::string who =
      "redis " + options_.host + ":" + std::to_string(options_.port) + ": WAIT " + std::to_string(replicas) + ": ";
  if (v.is_integer()) {
    throw RedisNotDurable(who + std::to_string(v.integer()) + " replicas acknowledged within " +
                          std::to_string(timeout_ms) + " ms");
  }
  throw RedisIoError(who + (v.is_error() ? v.error() : std::string("unexpected reply")));
}

}  // namespace delayd::redis
