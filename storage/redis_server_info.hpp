// What delayd reads of a Redis server's settings from INFO: what it may drop of delayd's keys once
// full (its maxmemory and maxmemory-policy, and what each policy would take), and whether it keeps
// an append-only file (what a restart forgets).
//
// delayd gives no time to live to anything a waiting job needs (its shard's hash of records, its
// pending set and windows, the shard's fence and in-flight entries): only to what it lets go
// anyway, the records and histories of settled jobs (redis.job_retention_s), the state indexes
// the console lists settled jobs from, and the leases and records of bulk operations. So, once
// the server holds maxmemory:
//
//   policy          what it drops                        for delayd
//   noeviction      nothing; writes are refused (OOM)    an outage it rides out: accepts wait
//                                                        in Kafka, nothing is lost
//   volatile-*      keys with a time to live             settled jobs' records may go before
//                                                        their retention ends; no waiting job
//   allkeys-*       any key                              a shard's waiting jobs can vanish,
//                                                        undelivered and without a trace
//
// A server without maxmemory (0) never evicts, whatever its policy says.
//
// A restart: with appendonly yes (and appendfsync everysec, Redis's default for it) the server
// comes back with all but at most its last second of writes; without it, with what its last RDB
// snapshot held, if any: every job accepted or settled since is forgotten, or comes back in an
// older state (a delivered job delivered again, a new one lost).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::storage {

// What a maxmemory-policy may take of delayd's keys (the table above).
enum class Eviction {
  none,          // noeviction
  settled_only,  // volatile-lru, volatile-lfu, volatile-random, volatile-ttl
  any_key,       // allkeys-lru, allkeys-lfu, allkeys-random
  unknown,       // a name this build does not know
};

// One server's memory limit and what it does at the limit.
struct EvictionPolicy {
  std::string policy;           // maxmemory_policy as the server names it, e.g. "allkeys-lru"
  std::uint64_t maxmemory = 0;  // bytes; 0: no limit, so the policy never applies
  Eviction eviction() const;    // of policy
  // Whether a full server may drop a waiting job: any_key with a limit set.
  bool drops_waiting_jobs() const { return maxmemory > 0 && eviction() == Eviction::any_key; }
};

// The policy named `name` may take (unknown for a name this build does not know).
Eviction eviction_of(std::string_view name);

// From the text of INFO (its memory section: "maxmemory:<bytes>" and "maxmemory_policy:<name>"
// lines, "\r\n" or "\n" ended). nullopt when it has no maxmemory_policy line (a server older than
// Redis 3.2, or a reply cut short); a missing or unreadable maxmemory reads as 0.
std::optional<EvictionPolicy> parse_eviction_policy(std::string_view info);
// From the text of INFO (its persistence section's "aof_enabled:<0|1>"): whether the server keeps
// an append-only file; nullopt when INFO does not say.
std::optional<bool> parse_aof_enabled(std::string_view info);

}  // namespace delayd::storage
