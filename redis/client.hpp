// RedisClient: what the rest of delayd needs from Redis, whether one server or a Cluster.
//
// Implementations: RedisConnection (one server, one hiredis connection) and, for Redis Cluster,
// a slot router over several connections. Callers see the same contract from both:
//   - command(): one command, one reply; an error reply is returned, not thrown.
//   - pipeline(): every command sent, every reply read, in order; result.size() ==
//     commands.size(). A router may split the batch by node; the order of replies is kept.
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
  // Durability: returns once `replicas` replicas acknowledge this client's writes so far (WAIT on
  // every server written to); throws RedisIoError when fewer do within timeout_ms, or on I/O
  // failure. replicas <= 0: returns at once.
  virtual void wait_replicas(int replicas, int timeout_ms) = 0;
};

}  // namespace delayd::redis
