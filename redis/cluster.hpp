// RedisCluster: a RedisClient for Redis Cluster, a small slot router over one RedisConnection
// (one synchronous hiredis connection) per node.
//
// Routing. A key's slot is CRC16 (XMODEM: polynomial 0x1021, initial value 0) of the key, or of
// its hash tag (the text between the first '{' and the next '}', when that text is not empty),
// modulo 16384. The router keeps a map slot -> primary, read with CLUSTER SLOTS from any node
// that answers (the primaries it knows first, then the seeds). A command goes to the primary of
// its keys' slot; which arguments are keys comes from a small table (EVAL/EVALSHA/FCALL: the
// numkeys keys; DEL/EXISTS/MGET/...: every argument; MSET: every other one; anything else: the
// first argument). A command whose keys lie in more than one slot gets a CROSSSLOT error reply
// and is never sent. Keyless commands go to one primary, except SCRIPT, FLUSHALL, FLUSHDB and
// FUNCTION, which go to every primary (the reply is the first primary's, or the first error).
//
// Redirects. MOVED <slot> <host:port>: the slot's entry is set to that node, the command is sent
// there, and the whole map is read again once per call. ASK <slot> <host:port>: ASKING and the
// command are sent to that node, once, and the map is left alone (the slot is still migrating).
// A command redirected more than max_redirects times makes the call throw RedisIoError.
//
// pipeline() groups the batch by node: one round trip per node and redirect round. Replies keep
// the order of the commands; the order in which commands run is kept per node, but a redirected
// command runs after the commands behind it in the batch (delayd's batches hold independent
// commands, or commands on one slot, which are redirected together).
//
// Failures: an unreachable node, or a transient error reply (TRYAGAIN during a migration,
// CLUSTERDOWN, READONLY, LOADING, ...) makes the call throw RedisIoError after one attempt to
// read the slot map again, so the next call goes to wherever the slots are then. Nothing any
// node says makes a call throw anything else than RedisIoError or RedisCommandError.
//
// Durability: wait_replicas() sends WAIT to every node this router sent a command to since the
// last successful wait. WAIT covers the writes of the connection it is sent on; after a
// reconnect it covers only those made since.
//
// Threading: one thread at a time, like the connections it owns.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "redis/client.hpp"
#include "redis/connection.hpp"
#include "redis/reply.hpp"

namespace delayd::redis {

struct RedisNodeAddress {
  std::string host;
  int port = 0;
  bool operator==(const RedisNodeAddress&) const = default;
  std::string to_string() const;  // host:port ([host]:port for IPv6)
};

struct RedisClusterOptions {
  std::vector<RedisNodeAddress> seeds;  // at least one; any node of the cluster
  RedisOptions node;                    // user, password, timeout_ms for every node; host, port ignored
  int max_redirects = 5;                // per command and call
};

// What the router has done so far (tests, logs).
struct RedisClusterStats {
  std::uint64_t moved = 0;       // MOVED replies followed
  std::uint64_t asked = 0;       // ASK replies followed
  std::uint64_t refreshes = 0;   // slot maps read
  std::uint64_t cross_slot = 0;  // commands refused without sending
};

inline constexpr int kRedisClusterSlots = 16384;

// The hash slot of a key, as the Redis Cluster spec defines it (hash tag aware).
std::uint16_t redis_key_slot(std::string_view key);

// An error reply with this message, as if a server had sent it (for refusals made locally).
// Precondition: message holds no CR or LF.
RedisReply make_error_reply(std::string_view message);

class RedisCluster final : public RedisClient {
 public:
  // Reads the slot map from the first seed that answers. Throws RedisIoError when no seed can be
  // reached or the cluster has no slots yet, RedisCommandError when a seed is not in cluster mode
  // or refuses AUTH.
  explicit RedisCluster(RedisClusterOptions options);

  // One command, routed by its keys' slot; redirects followed. An error reply is returned.
  RedisReply command(const Command& argv) override;
  // The command on each primary of the current map (read first if there is none), in slot order;
  // a node that cannot be reached makes the call throw RedisIoError, as command() does.
  std::vector<RedisReply> command_on_every_server(const Command& argv) override;
  // The batch split by node; replies in the order of the commands.
  std::vector<RedisReply> pipeline(const std::vector<Command>& commands) override;
  // WAIT replicas timeout_ms on every node written to since the last successful wait; throws
  // RedisIoError when a node cannot be reached or fewer replicas acknowledge.
  void wait_replicas(int replicas, int timeout_ms) override;
  // Kept, not written: collect() runs the earliest post() as pipeline() would (a batch may span
  // nodes and be redirected, which a post cannot follow). Same replies, same order, no overlap.
  void post(const std::vector<Command>& commands) override;
  std::vector<RedisReply> collect() override;
  void abandon() noexcept override;

  // Reads the slot map again (CLUSTER SLOTS from the first node that answers). Throws
  // RedisIoError when no node answers.
  void refresh_slots();
  // The primaries of the current map, in slot order of their first range.
  std::vector<RedisNodeAddress> primaries() const;
  // The primary of a slot in the current map, if any.
  std::optional<RedisNodeAddress> slot_owner(int slot) const;
  // One command on one node, no routing, no redirects (SCAN of one primary, CLUSTER INFO, ...).
  RedisReply command_on(const RedisNodeAddress& node, const Command& argv);
  const RedisClusterStats& stats() const { return stats_; }

 private:
  struct Node {
    RedisNodeAddress address;
    std::unique_ptr<RedisConnection> conn;  // null until first used, or after a failed connect
  };
  struct Pending {
    std::size_t index = 0;  // in the caller's batch
    std::size_t node = 0;   // in nodes_
    bool asking = false;
  };

  std::size_t node_index(const RedisNodeAddress& address);  // adds it if unknown
  RedisConnection& connection(std::size_t node);            // connects if needed (RedisIoError)
  // The node's pipeline; on RedisIoError, one refresh attempt, then the error again.
  std::vector<RedisReply> send(std::size_t node, const std::vector<Command>& commands);
  std::size_t owner_or_refresh(int slot);  // RedisIoError if the slot has no primary
  std::size_t any_primary();
  RedisReply broadcast(const Command& argv);
  bool try_refresh(std::size_t node);  // false: no usable answer from that node
  void refresh_quietly() noexcept;

  RedisClusterOptions options_;
  std::vector<Node> nodes_;                      // never shrinks: indices stay valid
  std::array<int, kRedisClusterSlots> slots_{};  // node index, -1: no primary known
  std::vector<std::size_t> primaries_;
  std::set<std::size_t> written_;  // nodes sent a command since the last successful wait
  RedisClusterStats stats_;
  std::string not_cluster_;                  // the refusal of a node not in cluster mode, for the constructor
  std::deque<std::vector<Command>> posted_;  // post()s not yet collected, oldest first
  // pipeline() itself, for collect() (pipeline() refuses to run while posts are outstanding).
  std::vector<RedisReply> run(const std::vector<Command>& commands);
  void require_idle(const char* what) const;
};

}  // namespace delayd::redis
