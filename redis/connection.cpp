#include "redis/connection.hpp"

#include <sys/time.h>

#include <stdexcept>

namespace delayd::redis {

namespace {

timeval to_timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

}  // namespace

RedisConnection::RedisConnection(RedisOptions options) : options_(std::move(options)) { ensure_connected(); }

void RedisConnection::fail(const std::string& what) {
  std::string msg = "redis " + options_.host + ":" + std::to_string(options_.port) + ": " + what;
  if (ctx_ && ctx_->err) msg += ": " + std::string(ctx_->errstr);
  ctx_.reset();  // a broken context cannot be trusted for the next exchange
  throw RedisIoError(msg);
}

void RedisConnection::ensure_connected() {
  if (ctx_) return;
  const timeval tv = to_timeval(options_.timeout_ms);
  ctx_.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port, tv));
  if (!ctx_) throw RedisIoError("redis: out of memory allocating a context");
  if (ctx_->err) fail("cannot connect");
  redisSetTimeout(ctx_.get(), tv);
  redisEnableKeepAlive(ctx_.get());

  auto checked = [this](const Command& argv, const char* what) {
    RedisReply r = command(argv);  // a transient refusal (LOADING) throws RedisIoError
    if (r.view().is_error()) {
      const std::string err = r.view().error();
      ctx_.reset();
      throw RedisCommandError("redis " + options_.host + ":" + std::to_string(options_.port) + ": " + what +
                              " refused: " + err);
    }
  };
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      checked({"AUTH", options_.password}, "AUTH");
    } else {
      checked({"AUTH", options_.user, options_.password}, "AUTH");
    }
  }
  if (options_.db != 0) checked({"SELECT", std::to_string(options_.db)}, "SELECT");
}

RedisReply RedisConnection::command(const Command& argv) {
  auto replies = pipeline({argv});
  return std::move(replies.front());
}

std::vector<RedisReply> RedisConnection::pipeline(const std::vector<Command>& commands) {
  ensure_connected();
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto& cmd : commands) {
    args.clear();
    lens.clear();
    for (const auto& a : cmd) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(args.size()), args.data(), lens.data()) != REDIS_OK) {
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
  for (const auto& r : replies) {
    if (r.view().is_error() && is_transient_error_reply(r.view().error())) {
      const std::string err = r.view().error();
      ctx_.reset();  // after a failover the next connection may reach the new primary
      throw RedisIoError("redis " + options_.host + ":" + std::to_string(options_.port) + ": " + err);
    }
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
