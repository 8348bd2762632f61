// RedisClient: what the rest of delayd needs from Redis, whether one server or a Cluster.
//
// Implementations: RedisConnection (one server, one hiredis connection) and, for Redis Cluster,
// a slot router over several connections. Callers see the same contract from both:
//   - command(): one command, one reply; an error reply is returned, not thrown.
//   - pipeline(): every command sent, every reply read, in order; result.size() ==
//     commands.size(). A router may split the batch by node; the order of replies is kept.
//   - post() and collect(): a pipeline split in two, so that the caller works while Redis does:
//     post() writes the commands and returns; collect() reads the replies of the earliest post()
//     not yet collected. Several posts may be outstanding, and Redis runs them in the order
//     they were posted. A router that cannot keep commands outstanding may run them at
//     collect() instead (same replies, same order, no overlap).
//   - RedisIoError (redis_connection.hpp) for "not now, retry the whole operation later"
//     (unreachable, LOADING, READONLY, a slot that moved and could not be followed, ...);
//     every delayd write is idempotent, so repeating the whole call is always safe.
// A multi-key command must keep all its keys in one hash slot (delayd's keys of one shard share
// the tag {<shard>}); a router refuses, with an error reply, to send one across slots.
// Threading: one thread at a time per client.
#pragma once

#include <string>
#include <vector>

#include "redis/reply.hpp"

namespace delayd::redis {

using Command = std::vector<std::string>;

class RedisClient {
 public:
  virtual ~RedisClient() = default;

  // One command, one round trip.
  virtual RedisReply command(const Command& argv) = 0;
  // All commands written, then all replies read. Postcondition: one reply per command, in order.
  virtual std::vector<RedisReply> pipeline(const std::vector<Command>& commands) = 0;
  // Writes the commands without reading their replies. Precondition: none. A RedisIoError
  // (here or from collect()) forgets every outstanding post: their replies are lost, and
  // whether they ran is unknown, so the caller posts again what it has not collected.
  virtual void post(const std::vector<Command>& commands) = 0;
  // The replies of the earliest outstanding post(), one per command, in order; throws as
  // pipeline() does. Precondition: a post() is outstanding (std::logic_error otherwise).
  virtual std::vector<RedisReply> collect() = 0;
  // Forgets every outstanding post() (their replies are not read; a connection with replies
  // owed is closed, the next call reconnects). Never throws.
  virtual void abandon() noexcept = 0;
  // command(), pipeline(), command_on_every_server() and wait_replicas() need no post()
  // outstanding (std::logic_error).

  // One command on every server that holds data (each primary of a cluster; the one server
  // otherwise), one reply a server, for what each answers for itself (FUNCTION LIST: a primary's
  // own libraries). An error reply is returned, not thrown; throws as command() does.
  // Postcondition: at least one reply.
  virtual std::vector<RedisReply> command_on_every_server(const Command& argv) = 0;

  // Durability: returns once `replicas` replicas acknowledge this client's writes so far (WAIT on
  // every server written to); throws RedisIoError when fewer do within timeout_ms, or on I/O
  // failure. replicas <= 0: returns at once.
  virtual void wait_replicas(int replicas, int timeout_ms) = 0;
};

}  // namespace delayd::redis
