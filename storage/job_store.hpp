// JobStore: the durable side of delayd. Every job lives in Redis from the moment its ingest
// offset may be committed until its retention ends; the in-memory wheel only mirrors the
// near future. This class owns the order of writes that keeps Redis consistent at every crash
// point:
//
//   accept   1. job hash created (script, idempotent on job-id)
//            2. SET NX the payload, then ZADD to its shard's pending set (both re-done on a
//               replay; NX keeps the first publish's payload)
//            crash after 1: the ingest offset is not committed, the record is replayed, the
//            script reports "exists, still delay" and step 2 runs again.
//   deliver  1. claim: attempt+1, firing_at stamped   (a cancel now answers in_flight), and the
//               payload read in the same round trip
//            2. the broker produces the ready record and waits for Kafka's acknowledgement
//            3. mark ready (only if still delay)        4. ZREM and UNLINK the payload
//            crash before 3: the job is still delay and pending, so it is loaded and delivered
//            again after restart (a duplicate with the same job-id: at-least-once).
//            crash between 3 and 4: the pending entry points at a ready job; claim answers
//            "ready" and the broker drops the stale entry (and the payload).
//   cancel   1. cancelled (only if delay and not in flight)   2. ZREM, UNLINK the payload
//            crash between: the stale entry is dropped at claim time, as above.
//            An unknown id: a remembered cancel (a cancelled hash that expires); accept then
//            fills it in and writes no payload and no pending entry, in one script call.
//   retry    1. release: firing_at cleared (kept when the record was possibly written, so that
//               no cancel can win until a later attempt settles it), last_error, and the
//               attempt refunded unless Kafka refused the record for good
//            2. ZADD XX re-scores the entry to the retry time (XX: never resurrect an entry that
//               a finished job's ZREM removed).
//            crash between: the entry keeps its old score, so the job is retried sooner.
//   fail     the broker writes the dead-letter record first, then marks failed, then ZREM.
//   set aside (claim met a job that cannot be delivered; see set_aside())
//            corrupt hash: the claim script itself marks it failed with error "corrupt job
//               record: ..."; then ZREM and UNLINK the payload.
//            payload unreadable or missing: mark failed with the reason, then ZREM, UNLINK.
//            no readable hash (missing, or not a hash): HSET the reason into the shard's
//               quarantine hash, then ZREM, UNLINK.
//            crash between any two: the entry is still pending, the next claim meets the same
//               job (now failed, or still unreadable) and the step is done again.
//
// A finished job keeps its hash for the retention period; its payload is deleted at once (it
// is on the ready or dead-letter topic by then). That keeps finished jobs cheap.
//
// So: an entry in a pending set may point at a job that is no longer delay (harmless, dropped
// when met), but a job in state delay is always in its shard's pending set once its offset is
// committed. Counters in <prefix>:stats are bumped after each transition that happened; a crash
// between the two can leave a counter off by one (they are for dashboards, not for truth).
//
// Errors: RedisIoError when Redis is unreachable or says "not now" (LOADING, READONLY, OOM, ...:
// the caller retries the whole call later; every call is safe to repeat), RedisCommandError when
// Redis refuses something for good (a bug or a misconfigured server). No byte read from Redis
// can make a call throw anything else: fields that do not parse are reported per job (claim's
// Kind::corrupt and Kind::unreadable, accept's JobState::corrupt) so that the caller can set
// that one job aside.
// Threading: one thread at a time, like the connection it owns.
#pragma once

#include "storage/header_codec.hpp"
#include "storage/job_state.hpp"
#include "storage/key_schema.hpp"
#include "storage/redis_connection.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace delayd::storage {

struct NewJob {
  std::string job_id;
  std::int64_t deliver_at = 0;  // epoch ms
  std::string business;
  std::string topic;   // the ready topic
  std::string shard;   // shard_id(ingest topic, partition)
  std::string source;  // "<topic>/<partition>/<offset>" of the ingest record, for people
  std::optional<std::string> key;
  std::optional<std::string> value;
  StoredHeaders headers;
};

struct AcceptOutcome {
  bool created = false;  // false: the job-id existed (a replay or a duplicate publish)
  bool cancelled_early = false;  // its cancel came first: accepted straight into cancelled
  JobState state = JobState::delay;  // the job's state now (corrupt: the existing hash is unreadable)
  std::string shard;     // the shard that holds it (the first publish's)
  std::int64_t deliver_at = 0;
};

struct PendingEntry {
  std::string job_id;
  std::int64_t deliver_at = 0;
  bool operator==(const PendingEntry&) const = default;
};

struct Claim {
  enum class Kind {
    deliver,     // produce it
    early,       // Redis's deliver_at is later than the caller's now: wait for it
    finished,    // ready, cancelled or failed already: the pending entry is stale
    corrupt,     // cannot be delivered (`reason`); `marked_failed` says whether Redis says so yet
    unreadable,  // no readable job hash (missing, or not a hash): the entry is moved aside
  };
  Kind kind = Kind::finished;
  std::string job_id;
  JobState state = JobState::missing;  // for finished: ready | cancelled | failed
  std::string reason;                  // for corrupt and unreadable, for people
  bool marked_failed = false;          // for corrupt: the claim script already marked it failed
  std::int64_t deliver_at = 0;
  std::string topic;
  std::optional<std::string> key;
  std::optional<std::string> value;
  StoredHeaders headers;
  std::string business;
  std::string shard;
  int attempt = 0;  // this attempt's number, from 1
};

// A finished transition: which job, and whether this call made it.
struct Transition {
  std::string job_id;
  bool changed = false;
  JobState state = JobState::missing;  // after the call; in_flight: a cancel met a record on its way
  std::string business;
  std::string shard;
};

struct StoreStats {
  std::int64_t pending = 0;                    // entries in all pending sets
  std::optional<std::int64_t> next_due;        // smallest deliver_at among them
  std::map<std::string, std::int64_t> pending_by_shard;
  std::map<std::string, std::map<std::string, std::int64_t>> by_business_state;  // counters
};

class JobStore {
 public:
  // Loads the scripts into Redis (SCRIPT LOAD) so that later calls are EVALSHA only.
  JobStore(RedisConnection& redis, KeySchema keys, std::int64_t retention_s);

  // Precondition: every job has a non-empty job_id, business, topic and shard.
  // Postcondition: each job that is created, or exists in state delay in this same shard, is in
  // its shard's pending set. One round trip for the hashes, one for the sets and counters.
  std::vector<AcceptOutcome> accept(std::span<const NewJob> jobs, std::int64_t now_ms);

  // Pending entries of one shard with after < deliver_at <= upto, ascending, at most `limit`.
  // after = nullopt means from the beginning; limit = 0 means no limit. Ties are returned in
  // job-id order (Redis's order). Scores that are not whole milliseconds are rounded up.
  std::vector<PendingEntry> pending_between(std::string_view shard, std::optional<std::int64_t> after,
                                            std::int64_t upto, std::size_t limit);

  // Claims due jobs for delivery (see the header comment). One round trip.
  std::vector<Claim> claim(std::span<const std::string> job_ids, std::int64_t now_ms);

  // After Kafka acknowledged: ready, then ZREM. One round trip each.
  std::vector<Transition> mark_ready(std::span<const std::string> job_ids, std::int64_t now_ms);
  // A failed attempt that will be retried at retry_at: its pending entry re-scored to retry_at
  // so that a restart (or a retry beyond the load window) waits for the backoff too. The job hash
  // keeps its deliver_at. `refund`: the attempt does not count (see kRelease). `keep_firing`: the
  // record may be in Kafka, so the job stays in flight for cancels.
  struct ReleaseOptions {
    bool refund = false;
    bool keep_firing = false;
  };
  Transition release(const std::string& job_id, std::string_view error, std::int64_t retry_at,
                     ReleaseOptions options);
  // Attempts exhausted (the broker has already written the dead-letter record).
  Transition mark_failed(const std::string& job_id, std::string_view reason, std::int64_t now_ms);
  // Cancel by id: cancelled and removed from its pending set, if pending and not in flight.
  // An unknown id is remembered for remember_s seconds (0: not at all): a job that arrives with
  // that id within the time is accepted straight into cancelled and never delivered.
  Transition cancel(const std::string& job_id, std::int64_t now_ms, std::int64_t remember_s = 0);
  // Gets jobs that claim() found undeliverable out of the way, in one round trip or two: claims
  // of kind finished (stale entries), corrupt and unreadable, all of `shard` (see the header
  // comment for the order of writes). Claims of other kinds are ignored. Safe to repeat.
  void set_aside(std::string_view shard, std::span<const Claim> claims, std::int64_t now_ms);

  // The job's hash as stored (binary-safe), plus "key", "value" (each only if not null) and
  // "headers" (encoded) from its payload while it has one; nullopt if there is no such job.
  // A key that is not a hash gives {"error": ...}, a payload that does not decode "payload_error".
  std::optional<std::map<std::string, std::string>> get(std::string_view job_id);
  StoreStats stats();

  const KeySchema& keys() const { return keys_; }

 private:
  enum class Script { accept, claim, mark_ready, release, mark_failed, cancel, count_ };
  // Runs `script` once per (job key, args), pipelined, reloading scripts if Redis lost them.
  // `also(i)`, if given, returns commands sent right after job i's script in the same round
  // trip; the replies then come in groups of 1 + also(i).size(), which must be the same for all.
  std::vector<RedisReply> eval_each(Script script, const std::vector<Command>& per_job,
                                    const std::function<std::vector<Command>(size_t)>& also = {});
  void load_scripts();
  Transition transition(Script script, const std::string& job_id, Command args);
  void after_transitions(const std::vector<Transition>& done, JobState from_state);
  void run_checked(const std::vector<Command>& commands);

  RedisConnection& redis_;
  KeySchema keys_;
  std::int64_t retention_s_;
  std::vector<std::string> shas_;
};

}  // namespace delayd::storage
