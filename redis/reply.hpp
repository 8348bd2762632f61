// RedisReply: sole owner of a hiredis redisReply tree (freeReplyObject on destruction), with
// read-only views of its elements.
//
// Invariants: a RedisReply owns the root of one reply tree; a ReplyView is a non-owning view into
// a tree and must not outlive the RedisReply it came from.
// Threading: no shared state; a reply belongs to whoever holds it.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace delayd::redis {

// An error reply from Redis (the command ran and was refused), as opposed to RedisIoError.
struct RedisCommandError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// True for the error replies that say "not now" rather than "never": the server is loading its
// data set (LOADING), busy with a script (BUSY), a replica after a failover (READONLY), a cluster
// slot in migration or a cluster that is down (TRYAGAIN, CLUSTERDOWN, MASTERDOWN), writes are
// refused because persistence or memory failed (MISCONF, OOM), or too few replicas acknowledge
// (NOREPLICAS). The same command may succeed later, so callers retry with backoff.
inline bool is_transient_error_reply(std::string_view message) {
  constexpr std::string_view kTransient[] = {"LOADING",    "BUSY",    "READONLY", "TRYAGAIN",  "CLUSTERDOWN",
                                             "MASTERDOWN", "MISCONF", "OOM",      "NOREPLICAS"};
  const std::string_view word = message.substr(0, message.find(' '));
  for (std::string_view t : kTransient) {
    if (word == t) return true;
  }
  return false;
}

class ReplyView {
 public:
  explicit ReplyView(const redisReply* r) : r_(r) {}

  bool is_nil() const { return r_->type == REDIS_REPLY_NIL; }
  bool is_error() const { return r_->type == REDIS_REPLY_ERROR; }
  bool is_array() const { return r_->type == REDIS_REPLY_ARRAY; }
  bool is_integer() const { return r_->type == REDIS_REPLY_INTEGER; }
  bool is_string() const { return r_->type == REDIS_REPLY_STRING || r_->type == REDIS_REPLY_STATUS; }

  // Preconditions: the reply is of the kind asked for; otherwise RedisCommandError (for an
  // error reply, with Redis's own message) so that a surprise never reads garbage.
  std::string_view str() const {
    expect(is_string(), "a string");
    return {r_->str, r_->len};
  }
  std::optional<std::string> opt_str() const {
    if (is_nil()) return std::nullopt;
    return std::string(str());
  }
  long long integer() const {
    expect(is_integer(), "an integer");
    return r_->integer;
  }
  std::size_t size() const {
    expect(is_array(), "an array");
    return r_->elements;
  }
  ReplyView operator[](std::size_t i) const {
    expect(is_array() && i < r_->elements, "an array element");
    return ReplyView(r_->element[i]);
  }
  std::string error() const { return is_error() ? std::string(r_->str, r_->len) : std::string(); }

 private:
  void expect(bool ok, const char* what) const {
    if (ok) return;
    if (is_error()) throw RedisCommandError("redis: " + error());
    throw RedisCommandError(std::string("redis: expected ") + what + " in reply, got type " + std::to_string(r_->type));
  }
  const redisReply* r_;
};

class RedisReply {
 public:
  explicit RedisReply(redisReply* r) : r_(r) {}
  ReplyView view() const { return ReplyView(r_.get()); }
  const ReplyView operator*() const { return view(); }

 private:
  struct Free {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  std::unique_ptr<redisReply, Free> r_;
};

}  // namespace delayd::redis
