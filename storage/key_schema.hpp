// The names of every Redis key delayd writes. The key table of docs/operating/job-state.md
// mirrors this file.
//
//   <prefix>:{<shard>}:jobs          hash    job-id -> record, for each job of the shard whose
//                                            state is delay (the record's grammar is below)
//   <prefix>:{<shard>}:job:<job-id>  string  the record of a job in any other state (ready,
//                                            running, finished, cancelled, failed), which
//                                            expires after the retention once settled
//   <prefix>:{<shard>}:pending:windows zset  the pending set's directory: the shard's jobs not yet
//                                            delivered, and the delivered ones waiting for an ack
//                                            deadline, each scored where its record says
//                                            (job_record.hpp, pending_score()), are kept in leaves
//                                            of at most kPendingLeafMax entries,
//                                            <prefix>:{<shard>}:pending:<separator>, each listed
//                                            in the directory of its window of score
//                                            (kPendingWindowMs), <prefix>:{<shard>}:pending:w:<n>;
//                                            this one lists the windows that hold entries, each
//                                            scored by its number (prelude_pending.lua has the layout)
//   <prefix>:{<shard>}:pending:size  string  how many entries the leaves hold
//   <prefix>:{<shard>}:pending       zset    0.3's pending set (one sorted set): moved into leaves
//                                            by the first load of the shard (pending.lua)
//   <prefix>:{<shard>}:stats         hash    counters "<business>|<state>" of the shard's jobs
//   <prefix>:{<shard>}:quarantine    hash    job-id -> reason, for pending entries of the shard
//                                            that pointed at no readable job record
//   <prefix>:{<shard>}:inflight      hash    job-id -> "<attempt> <firing_at> <epoch>" for each job
//                                            claimed for delivery and not settled yet (a cancel
//                                            then answers in_flight); the attempt counts this
//                                            one, epoch is the fence of the claiming owner
//   <prefix>:{<shard>}:owner         string  "<epoch> <member> <since_ms>": the shard's fence
//                                            (lua_scripts.hpp, FENCING); epoch only grows
//   <prefix>:{<shard>}:history:<id> list    one job's events beyond the plain path, oldest first,
//                                            "<ms> <event> <attempt> <detail>" (detail
//                                            percent-encoded), the last 100; expires with the record
//   <prefix>:{<shard>}:state:<state> zset   the shard's jobs whose record is in <state> (ready,
//                                            running, finished, cancelled, failed; delay jobs are
//                                            in the pending set), by when they entered it (epoch
//                                            ms); entries older than the retention are trimmed and
//                                            the set expires a retention after its last entry
//                                            (prelude.lua, enter()): the console's index
//   <prefix>:{<shard>}:waiting:<business> zset  the shard's delay jobs of one business, scored as
//                                            in the pending set, kept only while there are at
//                                            most kWaitingIndexMax of them (prelude.lua, wadd()):
//                                            the console's index of a rare business
//   <prefix>:{<shard>}:waiting       hash    business -> 'on' (its waiting index lists every
//                                            delay job of it) or 'off' (not kept)
//   <prefix>:{<shard>}:wake          list    job-ids whose pending entry a member that may not own
//                                            the shard moved (a report, a reschedule); the owner
//                                            pops them and moves their timers
//   <prefix>:{<shard>}:zdict:<id>    string  a zstd dictionary that payloads of the shard were
//                                            compressed with (payload_compression.hpp); immutable
//   <prefix>:shards                  set     every shard that ever held a job (tools, stats)
//   <prefix>:zdict                   string  the zstd dictionary a starting process compresses with
//   <prefix>:ops, <prefix>:op:<id>, <prefix>:op:<id>:lease: the console's bulk operations
//                                            (operation_store.hpp)
//
// A shard is one partition of the ingest topic, named "<topic>:<partition>". Every key of a
// shard carries the shard in a hash tag, so under Redis Cluster they share a slot and one
// script call can move a whole batch of the shard's jobs (lua_scripts.hpp).
//
// Where a job's record lives. While the job is delay (waiting to be delivered), its record is a
// field of the shard's hash `jobs`; in any other state it is the string `job:<id>`, so that a
// settled job's record can expire after the retention (a hash field cannot, on Redis 7.0). A
// record is in exactly one of the two: every write of a record (prelude_jobs.lua, write(); the fast
// mark of mark_ready.lua) puts it in its place and deletes it from the other. A pending job so
// costs a hash field and a leaf entry: 32 B less than a key of its own (the key's object and
// its longer name; docs/performance/history-2026-11-24.md, "Redis bytes per pending job"). Reads look in the hash
// first, then at the key: 0.3 kept every record in a key, and a delay record of 0.3 is moved
// into the hash when a claim or any write meets it.
//
// The job record (job_record.hpp has its exact grammar, and the one list of its states, names
// and limits):
//   <state> <deliver_at> <attempt> <business>[ <name>=<value>]...\n<payload>
//   state      delay | ready | running | finished | cancelled | failed
//   deliver_at epoch ms; attempt: delivery attempts settled so far (the one under way, if any,
//              is in the in-flight hash); business: "-" for a remembered
//              cancel whose job has not arrived
//   names      last_error, ready_at, running_at, finished_at, cancelled_at, failed_at, error,
//              cancelled_early, every and count (a repeating job's interval in ms and its number
//              of occurrences), rep (the occurrence pending, from 1), rd (ack-timeout
//              redeliveries), nb (epoch ms: a delay job is not due before it (a retry's time, an
//              operator's retry, the passed ack deadline of a redelivery); a ready or running job's
//              ack deadline; its pending entry is at pending_score()), dead (a reason: the
//              next claim dead-letters the job), ma (with an ack timeout: the business's
//              max_process_attempts when the job became ready), stop (1: a repeating job
//              cancelled while an occurrence was in flight; the series ends after it), h (1: the
//              job has a history list), mv (when a script last moved the waiting job's pending
//              entry to a new time: reschedule, retry, repeat; a walk of the waiting jobs that
//              started before it leaves the job out, so that it never lists a job twice), dl
//              ("<partition>:<offset>" of a failed job's record in the dead-letter topic), rv
//              (the redrive-count of the dead letter the job was created or revived from), vo
//              (an upserted job: the ingest offset of its version, which orders the versions),
//              cron and tz (a calendar repeat's expression, percent-encoded, and its IANA
//              zone), until (no occurrence after it), cu (repeat-catchup when not latest: all
//              or none), cc (missed occurrences delivered in a row, for cu=all); RepeatRule
//              (repeat_rule.hpp) is their reading; ml (max-lateness-ms: not delivered later
//              than deliver_at + ml), z (1: the payload is stored zstd-compressed,
//              payload_compression.hpp; dropped with the payload)
//              (times in epoch ms; free text percent-encoded: %20 space, %0A newline, %25 %)
//   payload    header_codec.hpp's encoding of the record's key, value and headers; present
//              while the job is delay, dropped when it finishes (it is on its topic by then),
//              except for a business that keeps payloads: then until finished, and a failed
//              job keeps it for the retention (an operator may retry it)
// So `HGET <prefix>:{<shard>}:jobs <id>` (a delay job) or `GET <prefix>:{<shard>}:job:<id>` (any
// other) shows the state as the first word; a settled job's record expires after the retention. The first line is short
// on purpose: with a 200-byte value the whole record stays within one allocator size class (see
// docs/performance/components.md, "Throughput and memory per job").
//
// Invariant: the prefix matches [A-Za-z0-9._-]+ (the config checks it), so the first "{...}" in a
// shard key is always the shard's hash tag.
// Threading: immutable after construction.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::storage {

inline std::string shard_id(std::string_view topic, std::int32_t partition) {
  return std::string(topic) + ":" + std::to_string(partition);
}
// The partition of `topic` that shard_id() named `shard`; nullopt for a shard of another topic.
inline std::optional<std::int32_t> partition_of(std::string_view shard, std::string_view topic) {
  if (shard.size() <= topic.size() + 1 || shard.substr(0, topic.size()) != topic || shard[topic.size()] != ':') {
    return std::nullopt;
  }
  const std::string_view digits = shard.substr(topic.size() + 1);
  std::int32_t p = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), p);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size() || p < 0) return std::nullopt;
  return p;
}

// The most delay jobs of one business in one shard for which the shard keeps a waiting index
// of the business. A page of a business with more is found soon enough by walking the pending
// set (the walk looks at about pending / this entries per match: 60 with a million waiting jobs
// in four shards); the index costs about 110 B per job it holds, so at most this many per
// business and shard.
inline constexpr std::size_t kWaitingIndexMax = 4096;

// The most entries of one leaf of the pending set (prelude_pending.lua). Redis keeps a sorted set of at
// most zset-max-listpack-entries (128 by default) entries of at most zset-max-listpack-value
// (64) bytes each as a listpack: about 32 B per entry with a 16-byte job-id, against about 118 B
// in a larger one's skiplist and hash table. But a listpack is searched from its start on every
// insert, so a leaf of 128 made accept cost 9.2-9.5 us of Redis per job against 6.6-6.8 us with
// one sorted set; 64 costs 7.2-7.3 us, and about 2 B more per entry for the leaves' own keys
// (bench/broker_bench, 200-byte values, 2026-11-27). A Redis configured below 64 keeps leaves as
// skiplists: correct, only larger.
inline constexpr std::size_t kPendingLeafMax = 64;
// The width of one window of the pending set (prelude_pending.lua), in ms of score: a leaf's
// entries all fall in one window, floor(score / kPendingWindowMs), found by arithmetic, whose own
// directory lists its leaves. A wider window holds more leaves (a directory past 128 is a
// skiplist again, walked at each insert); a narrower one costs more directories (about 250 B
// each, with its first leaf's key and its entry in the shard's directory of windows) where jobs
// are sparse, and more of them to make. A minute: ten million jobs due within a day fill a
// window of each of four shards with about 1 700 entries, a directory of about 40 leaves; a
// hundred thousand, 17, one leaf. With windows of ten seconds, a hundred thousand jobs scattered
// over a day cost Redis 480 B each against 351 with one directory a shard; with a minute, 367
// (docs/performance/scale.md, "The pending set in windows").
inline constexpr std::int64_t kPendingWindowMs = 60'000;

class KeySchema {
 public:
  explicit KeySchema(std::string prefix) : prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }
  // A job's record while its state is not delay (a string of its own, which can expire), and
  // 0.3's key of a delay job's record (read where the shard's hash of delay records has none).
  std::string job(std::string_view shard, std::string_view job_id) const {
    return tagged(shard) + ":job:" + std::string(job_id);
  }
  // The shard's delay jobs' records, one field per job-id (prelude_jobs.lua, read() and write(): a
  // record is in exactly one of this hash and job(); see the layout at the top of this file).
  std::string delay_records(std::string_view shard) const { return tagged(shard) + ":jobs"; }
  // The pending set's directory of windows (KEYS[1] of every batch script; prelude_pending.lua
  // reads and writes the windows' directories, pending_window(), their leaves, pending_leaf(), and
  // the count, pending_size(), beside it). record_lua_gen.cpp gives prelude.lua these names and
  // the others its scripts build (KEY).
  std::string pending(std::string_view shard) const { return tagged(shard) + ":pending:windows"; }
  // The directory of one window's leaves, by the window's number (a member of pending():
  // floor(score / kPendingWindowMs) in decimal), as prelude_pending.lua names it (WINDOW).
  std::string pending_window(std::string_view shard, std::string_view window) const {
    return tagged(shard) + ":pending:w:" + std::string(window);
  }
  // A leaf, by its separator (a member of its window's directory), as prelude_pending.lua names
  // it (LEAF).
  std::string pending_leaf(std::string_view shard, std::string_view separator) const {
    return tagged(shard) + ":pending:" + std::string(separator);
  }
  // How many entries the leaves hold (a string; prelude_jobs.lua's flush() keeps it).
  std::string pending_size(std::string_view shard) const { return tagged(shard) + ":pending:size"; }
  // The pending set as 0.3 kept it (one sorted set): moved into leaves when a loader first reads
  // the shard (pending.lua).
  std::string pending_0_3(std::string_view shard) const { return tagged(shard) + ":pending"; }
  std::string stats(std::string_view shard) const { return tagged(shard) + ":stats"; }
  std::string quarantine(std::string_view shard) const { return tagged(shard) + ":quarantine"; }
  std::string in_flight(std::string_view shard) const { return tagged(shard) + ":inflight"; }
  std::string owner(std::string_view shard) const { return tagged(shard) + ":owner"; }
  std::string history(std::string_view shard, std::string_view job_id) const {
    return tagged(shard) + ":history:" + std::string(job_id);
  }
  std::string wake(std::string_view shard) const { return tagged(shard) + ":wake"; }
  std::string waiting_marks(std::string_view shard) const { return tagged(shard) + ":waiting"; }
  std::string waiting(std::string_view shard, std::string_view business) const {
    return waiting_marks(shard) + ":" + std::string(business);
  }
  // Precondition: state is stored and not delay (job_record::kStates).
  std::string state_index(std::string_view shard, std::string_view state) const {
    return tagged(shard) + ":state:" + std::string(state);
  }
  std::string shards() const { return prefix_ + ":shards"; }
  // A payload compression dictionary (payload_compression.hpp): in a shard that holds records
  // compressed with it, by its id; and the one a process that starts compresses with.
  std::string dictionary(std::string_view shard, std::uint32_t id) const {
    return tagged(shard) + ":zdict:" + std::to_string(id);
  }
  std::string dictionary() const { return prefix_ + ":zdict"; }
  // The layout of everything under the prefix: "<layout> <version of the delayd that wrote it>"
  // (JobStore::claim_layout()).
  std::string layout() const { return prefix_ + ":layout"; }
  std::string operations() const { return prefix_ + ":ops"; }
  std::string operation(std::string_view id) const { return prefix_ + ":op:" + std::string(id); }
  std::string operation_lease(std::string_view id) const { return operation(id) + ":lease"; }

 private:
  std::string tagged(std::string_view shard) const { return prefix_ + ":{" + std::string(shard) + "}"; }
  std::string prefix_;
};

}  // namespace delayd::storage
