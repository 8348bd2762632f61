// JobStore: the durable side of delayd. Every job lives in Redis from the moment its ingest
// offset may be committed until its retention ends; the in-memory wheel only mirrors the
// near future. This class owns the order of writes that keeps Redis consistent at every crash
// point.
//
// Each job is one record (key_schema.hpp) in its shard's hash slot, beside the shard's pending
// set and counters: a field of the shard's hash of delay records while the job waits, a key of
// its own in any other state. Every transition is one script call that moves a whole batch of
// one shard's jobs (lua_scripts.hpp): record (and its move between hash and key), pending entry
// and counters change together or not at all. So the crash points lie between calls, never
// inside one:
//
//   step      the call                                      crash after it (delayd dies)
//   dict      SET NX of the shard's compression dictionary  a dictionary that no record may
//             (payload_compression.hpp), on the accept's    use: harmless (16 KiB); a record
//             connection ahead of its first record that     that names it is never written
//             needs it; once per store and shard            before it
//   accept    record HSETNX (no key of the id) + ZADD +     offset not committed: the record
//             counters                                      is replayed; HSETNX finds the job,
//                                                           the script re-adds its entry, no
//                                                           second job, first payload kept
//   claim     in-flight entry "<attempt+1> <firing_at>      the job is delay and pending: it is
//             <epoch>" (cancel: in_flight); the record is   loaded and claimed again after the
//             read in the same round trip, not rewritten    restart (the entry's attempt counts
//             (stale, corrupt, unreadable set aside; a      both)
//             0.3 record moved from its key into the hash)
//   produce   the broker's Kafka write; no Redis call       as above: delivered twice, with the
//                                                           same job-id (at-least-once)
//   mark      ready (attempt from the in-flight entry,      done: nothing left to repeat
//             which goes), payload dropped, SET EX
//             retention + HDEL from the hash, ZREM; only
//             while the in-flight entry names the mark's
//             attempt (else: no change, see below)
//   retry     release: in-flight entry removed (kept when   the entry waits for the retry time;
//             the record may be in Kafka), last_error and   a restart meets it then
//             the attempt (refunded unless Kafka refused it
//             for good) into the record, ZADD XX to the
//             retry time
//   fail      the broker writes the dead-letter record      before the call: the job is retried
//             first, then failed + ZREM in one call         and dead-lettered again (twice in the
//                                                           DLQ at worst, never lost)
//   cancel    cancelled + ZREM (delay, not in flight; an   done; read again, a cancel finds the
//             upserted job's vo below the cancel's offset)  job cancelled, or upserted after it
//             an unknown id: a remembered cancel that       accept fills it in: cancelled, no
//             expires after remember_s                      payload, no pending entry
// The lifecycle (docs/consuming.md, "Job lifecycle") adds these, each one call too:
//   mark      keep: ready with its payload; with an ack     as mark above; a crash before it
//   (kept,    timeout the entry stays, at the deadline.     delivers the job again (attempt
//   repeat)   repeat: delay again at the next occurrence,   counts both), as before
//             entry re-scored, payload kept
//   redeliver claim of a ready/running job past its ack     as claim above: delivered again
//             deadline: delay again + in-flight entry       after the restart
//   report    running / finished: the record (and entry)    offset not committed: the report is
//             failed: delay at the retry time (entry        read again; running refreshes,
//             re-scored, wake list), or due at once         finished and failed find the job
//             marked dead; no payload: failed               changed and are ignored (a report
//                                                           naming its attempt is exact)
//   dead      as fail above: the owner's claim sees the     twice in the DLQ at worst
//             mark and writes the dead letter first
//   reschedule record (new deliver_at, mv) + ZADD + wake    read again: moves it to the same
//             list (also an operator's run-now)             time, or finds it in flight
//   retry     an operator's: failed -> delay with its kept  the operator's answer is lost; the
//             payload, ZADD now + wake list                 job is delivered; asking again
//                                                           answers 409 (not failed)
//   upsert    accept of a version (vo = its offset): a      offset not committed: read again,
//             waiting job replaced (record, vo, mv) + ZADD  its vo is no longer above the
//             + wake list; a delivered or final one: a new  record's: nothing (never a second
//             job (record, history kept) + ZADD; in flight: job, never an older version back);
//             nothing, asked again after it settles         the wait holds its offset
//   skip      a repeat's missed occurrence (the claim's     the skip is not written: the job is
//             rule says a later one is due too, and its     claimed again after the restart and
//             repeat-catchup is latest or none): in-flight  the broker skips it again; nothing
//             entry removed, attempt not counted, delay at  was produced for it, so none is
//             the occurrence the broker chose + ZADD (or    doubled; the next occurrence is
//             failed if none is left), as one call          chosen in the same call as the mark
//   mark      the next occurrence of a calendar repeat is   as mark (repeat) above
//   (cron)    computed by the broker before the call and
//             written by it with the mark: never apart
//   revive    accept of a redriven dead letter of a failed  as accept above: read again, its
//             job (redrive-count above the record's rv):    redrive-count is no longer above
//             the new record (delay, history kept) + ZADD   the record's, so it revives once
// The console's state indexes (key_schema.hpp) change inside the same calls as the records
// they list (prelude_jobs.lua's write(), and mark_ready.lua's fast way): at every crash point a
// record and its index entry agree. What can disagree is harmless and bounded: an entry whose
// record expired before the trim (a walk skips it), a record written by a delayd before the
// indexes (not listed by state until it changes; waiting jobs are listed from the pending set).
// The waiting index of a business (prelude.lua, wadd()) moves in the same calls as the pending
// entries, so a shard that marks it complete ('on') lists every waiting job of the business at
// every crash point; what it may hold beyond them is an entry of a record found corrupt or
// missing when claimed, which a walk checks against the record and leaves out.
// A wake list entry lost with a crash costs nothing: every owner loads its shards from the
// pending sets, which the same calls wrote. One lost with an answer (take_wakes()'s pop ran, and
// the connection broke before its reply or before the entries were looked up) costs nothing
// either: the owner's loop, whose call failed, loads its shards again (Scheduler::reload()).
//
// A call whose answer is lost (Redis closes the connection after running it: a restart) is sent
// again, and by then the job may have moved on. Every call above is safe to repeat at any later
// time, and a mark is the one that needed a rule for it: it settles only the claim of its
// attempt still in flight (the in-flight entry names it). Without that, a mark repeated after a
// consumer's failed report had put the job back to wait for its retry made it ready again, and
// the retry never came; it could also skip a repeat's next occurrence, or settle a later claim
// whose record was not written yet. A claim lost with Redis's last unsynced second leaves the
// job delay and pending: it is claimed and delivered again (a duplicate, never a loss).
//
// Redis itself acknowledges a script's writes together and, with AOF, logs them together
// (MULTI/EXEC-style), so a Redis crash also leaves each call whole or absent.
//
// A finished job keeps its record (without payload) for the retention period. An entry in a
// pending set may point at a job that is no longer delay only if someone edited Redis by hand
// (harmless: claim drops it); a job in state delay is always in its shard's pending set.
// Counters in <prefix>:{<shard>}:stats change in the same call as the jobs they count.
//
// Fencing (lua_scripts.hpp, FENCING): a broker calls enable_fencing() once and take_shard()
// for each shard it is assigned. From then on claim, release, mark_failed and set_aside of a
// shard run only with the fence this store holds for it, and throw ShardFenced when Redis says
// another member took the shard since (or when this store holds no fence for it): nothing of
// that call was done. mark_ready, accept and cancel are never refused. The crash table above
// is unchanged by fencing; what fencing adds is the rebalance table:
//
//   moment                               the old owner                 the new owner
//   shard revoked, records in flight     their reports still mark      claims with a larger
//                                        ready (a fact); retries and   epoch: what the old
//                                        failures are refused          owner claimed is claimed
//                                                                      again (a duplicate only
//                                                                      if its record was already
//                                                                      produced)
//   old owner paused past its session,   every claim refused; held     as above
//   wakes up                             records re-checked before
//                                        sending (FirePath)
//
// Idempotency is per shard: the job-id names one job within one partition of the ingest topic.
// Publish every record of one job (and its cancel) with the same Kafka key, so that they land
// in the same partition; README says so.
//
// Errors: RedisIoError when Redis is unreachable or says "not now" (LOADING, READONLY, OOM, ...:
// the caller retries the whole call later; every call is safe to repeat), RedisCommandError when
// Redis refuses something for good (a bug or a misconfigured server). No byte read from Redis
// can make a call throw anything else: records that do not parse are reported per job (claim's
// Kind::corrupt and Kind::unreadable, accept's JobState::corrupt) and set aside.
// Threading: one thread at a time, like the connection it owns. A broker runs several stores, one
// per thread and connection (broker/service.hpp): the table above holds across them because the
// steps of one job are made one after the other (each after the previous call returned), and
// each call is one script.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"
#include "storage/header_codec.hpp"
#include "storage/job_state.hpp"
#include "storage/key_schema.hpp"
#include "storage/payload_compression.hpp"
#include "storage/repeat_rule.hpp"

namespace delayd::storage {

namespace lua {
enum class Script : unsigned char;  // lua_scripts.hpp
}

// How a JobStore calls its scripts (lua_scripts.hpp, "How Redis runs them").
enum class ScriptCalls : unsigned char {
  functions,  // delayd's function library: FUNCTION LOAD once, FCALL (falls back to eval: JobStore())
  eval,       // SCRIPT LOAD once, EVALSHA
};

struct NewJob {
  std::string job_id;
  std::int64_t deliver_at = 0;  // epoch ms
  std::string business;         // [A-Za-z0-9._-]+ (the ingest contract checks it)
  std::string shard;            // shard_id(ingest topic, partition)
  std::optional<std::string> key;
  std::optional<std::string> value;
  StoredHeaders headers;
  // A repeating job (docs/producing.md, "Repeats"): its first occurrence is deliver_at. Not repeating
  // unless repeat.repeats().
  RepeatRule repeat{};
  // Not delivered later than deliver_at + this (max-lateness-ms); 0: no limit.
  std::chrono::milliseconds max_lateness{0};
  // A redriven dead letter's redrive-count (0: not one). One higher than the record of a failed
  // job of the same id revives that job (accept.lua).
  std::int64_t redrive_count = 0;
  // An upsert (latest wins, accept.lua): the offset the record was read at in its shard, which
  // orders the versions of one id. nullopt: a schedule (the first publish wins).
  std::optional<std::int64_t> version;
};

// What accept did with one job (the codes accept.lua answers).
enum class AcceptKind : unsigned char {
  existed = 0,          // the job-id exists in this shard: a replay, a duplicate, an older version
  created = 1,          // a new job (or a failed one revived by a redrive of its dead letter)
  cancelled_early = 2,  // its cancel came first: accepted straight into cancelled
  in_flight = 3,        // an upsert of a job whose delivery is under way: nothing done, ask again
  updated = 4,          // an upsert: the waiting job is now this version
  again = 5,            // an upsert of an id whose job was delivered or final: a new job of it
};

struct AcceptOutcome {
  AcceptKind kind = AcceptKind::existed;
  JobState state = JobState::delay;  // the job's state now (corrupt: the existing record is unreadable)
  std::int64_t deliver_at = 0;       // the stored one (the first publish's, or the upsert's)
  // A job now waiting that was not before, or waits for another time.
  bool created() const { return kind == AcceptKind::created || kind == AcceptKind::again; }
};

// A job's in-flight entry (claim.lua writes it: "<attempt> <firing_at> <epoch>"): claimed for a
// delivery whose outcome is not written yet.
struct InFlightEntry {
  std::string job_id;
  int attempt = 0;             // the delivery's attempt (the ready record's attempt header)
  std::int64_t firing_at = 0;  // epoch ms of the claim that wrote it
  std::int64_t epoch = 0;      // the claiming owner's fence (0: an entry of a delayd before fencing)
  bool operator==(const InFlightEntry&) const = default;
};

struct PendingEntry {
  std::string job_id;
  std::int64_t deliver_at = 0;
  bool operator==(const PendingEntry&) const = default;
};

// A delivery a caller knows is in Kafka (a takeover found it in the shard's delivery log:
// broker/delivery_log.hpp): its attempt, and for a repeating job its occurrence (0: the job does
// not repeat). attempt 0: nothing known.
struct KnownDelivery {
  int attempt = 0;
  int repeat = 0;
  bool operator==(const KnownDelivery&) const = default;
};

struct Claim {
  enum class Kind {
    deliver,     // produce it
    early,       // Redis's deliver_at is later than the caller's now: wait for it
    finished,    // ready, cancelled or failed already: the stale entry was removed
    corrupt,     // cannot be delivered (`reason`); `marked_failed` says whether Redis says so yet
    unreadable,  // no readable job record: the entry was moved to the quarantine hash
  };
  Kind kind = Kind::finished;
  std::string job_id;
  JobState state = JobState::missing;  // for finished: ready | cancelled | failed
  std::string reason;                  // for corrupt and unreadable, for people
  bool marked_failed = false;          // for corrupt: the claim script already marked it failed
  bool kept = false;                   // for unreadable: could not be moved aside; meet it again later
  std::int64_t deliver_at = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  StoredHeaders headers;
  std::string business;
  int attempt = 0;  // this attempt's number, from 1
  // For deliver: the record may not be sent before this (epoch ms; >= deliver_at: a retry after a
  // failed report, or an ack deadline, may come later than deliver_at).
  std::int64_t not_before = 0;
  int repeat = 0;                             // the occurrence of a repeating job, from 1; 0: not repeating
  RepeatRule rule{};                          // a repeating job's rule (long form only)
  std::chrono::milliseconds max_lateness{0};  // max-lateness-ms (long form only); 0: no limit
  bool plain = true;                          // no repeat, no history: mark_ready may take the fast way
  bool redelivery = false;  // its ack deadline passed: delivered again, or dead-lettered (dead_reason)
  std::string dead_reason;  // non-empty: dead-letter it with this reason instead of delivering it
};

// A finished transition: which job, and whether this call made it.
struct Transition {
  std::string job_id;
  bool changed = false;
  JobState state = JobState::missing;  // after the call; in_flight: a cancel met a record on its way
  std::string shard;                   // where the job is (cancel_anywhere: where it was found)
  // mark_ready: the next occurrence (delay) or the ack deadline (ready); a mark that changed
  // nothing (the job was settled already): where the job waits if it is delay; else 0.
  std::int64_t at = 0;
};

// A consumer's report on a delivered job, read from the status topic (ReportStatus: job_state.hpp).
struct Report {
  std::string job_id;
  ReportStatus status = ReportStatus::finished;
  std::string error;  // for failed; at most 1000 bytes are kept
  // What the job's business asks (config/business_policy.hpp works it out from the job's attempt):
  std::int64_t retry_at = 0;                 // epoch ms: when a failed job with attempts left is due again
  int max_attempts = 1;                      // a failed report at this attempt or later dead-letters the job
  std::chrono::milliseconds ack_timeout{0};  // a running report pushes the ack deadline this far
  int attempt = 0;  // the delivery the report is about (echoed attempt header); 0: the current one
};
struct ReportOutcome {
  // wait: the job is in flight (its delivery not settled yet); ask again shortly.
  enum class Verdict { applied, ignored, wait, unknown } verdict = Verdict::unknown;
  JobState state = JobState::missing;  // after the call (ignored: the state that did not fit)
  bool dead = false;                   // failed for good: delay again until its dead letter is written
  std::int64_t due_at = 0;             // applied failed: when the job is due again
  std::string shard;                   // where the job is; empty for unknown
};
// What locate() found of a job: its shard and its record's first line fields.
struct Located {
  std::string shard;
  std::string business;
  int attempt = 0;
};

// The caller does not hold the shard's current fence: another member owns it now (or this store
// never took it). Nothing of the refused call was written.
struct ShardFenced : std::runtime_error {
  ShardFenced(std::string shard_name, const std::string& why)
      : std::runtime_error("shard " + shard_name + " fenced: " + why), shard(std::move(shard_name)) {}
  std::string shard;
};

// Where a job's dead-letter record is in the dead-letter topic.
struct DeadLetterAt {
  std::int32_t partition = 0;
  std::int64_t offset = 0;
};

// A place in a walk of one shard's jobs: an entry of the pending set or of a state index.
struct WalkPosition {
  std::int64_t score = 0;  // the entry's score (epoch ms)
  std::string job_id;
  bool operator==(const WalkPosition&) const = default;
};

// One shard's part of a job listing (browse.lua; the walk across shards is job_browse.hpp's).
// A delay walk goes through the pending set by due time, earliest first; a walk of another
// state through its state index (key_schema.hpp) by when the job entered it, newest first.
struct BrowseQuery {
  JobState state = JobState::delay;  // a stored state (job_record::kStates)
  std::int64_t walk_start = 0;       // epoch ms: later moves and entries are left out
  std::optional<WalkPosition> from;  // where to start; nullopt: the start of the range
  bool inclusive = false;            // whether `from` itself is listed
  std::int64_t lo = 0;               // the scores walked, lo..hi (a state walk starts at hi)
  std::int64_t hi = 0;
  std::size_t want = 50;                                 // matches at most
  std::size_t budget = 256;                              // entries looked at at most (one GETRANGE each, in Redis)
  std::string business;                                  // empty: any
  std::string id_prefix;                                 // empty: any
  std::string error_text;                                // lower case; empty: any; else the (last) error must hold it
  std::optional<std::int64_t> deliver_from, deliver_to;  // the record's deliver_at
};

struct BrowsedJob {
  std::string job_id;
  std::string shard;
  JobState state = JobState::delay;
  std::int64_t deliver_at = 0;
  std::int64_t attempt = 0;
  std::string business;
  std::string error;       // the error of a failed job, the last error of another; decoded
  std::int64_t score = 0;  // due time (delay) or when it entered its state
  bool in_flight = false;  // delay: a delivery is under way
};

struct BrowsePage {
  std::vector<BrowsedJob> jobs;      // in walk order
  std::optional<WalkPosition> last;  // the last entry looked at
  bool done = false;                 // nothing after `last` in the range
  std::size_t examined = 0;
};

struct StoreStats {
  std::int64_t pending = 0;              // entries in all pending sets
  std::optional<std::int64_t> next_due;  // smallest deliver_at among them
  std::map<std::string, std::int64_t> pending_by_shard;
  std::map<std::string, std::map<std::string, std::int64_t>> by_business_state;  // counters
};

class JobStore {
 public:
  // Jobs per script call: a call of 500 takes Redis about 2-5 ms, short enough not to hold up
  // other clients and long enough that the per-call cost disappears.
  static constexpr std::size_t kJobsPerCall = 500;

  // Loads the scripts into Redis so that later calls send their arguments only: delayd's function
  // library (FUNCTION LOAD, then FCALL) with ScriptCalls::functions, the default, unless Redis
  // has no functions (before 7) or the ACL denies FUNCTION: then, as with ScriptCalls::eval,
  // each script (SCRIPT LOAD, then EVALSHA). lua_scripts.hpp says how the two run the same texts.
  JobStore(redis::RedisClient& redis, KeySchema keys, std::int64_t retention_s,
           ScriptCalls calls = ScriptCalls::functions);
  // How this store calls its scripts, after the fallback above.
  ScriptCalls script_calls() const { return calls_; }

  // From now on accept() stores a payload (key, value and headers, encoded) longer than `bytes`
  // zstd-compressed (payload_compression.hpp); 0 (the default of a store): never. Every read
  // undoes it whatever this says, so that stores set differently share a Redis. With bytes > 0,
  // `dictionary` and no dictionary loaded in the process for the prefix, reads the prefix's
  // (<prefix>:zdict) to compress with: one round trip; a failure to read it is not an error (the
  // process then trains one of its own from its first payloads). Without `dictionary`, each
  // payload is compressed alone.
  void compress_payloads_above(std::size_t bytes, bool dictionary = true);
  // What the process's stores of this prefix compressed so far (payload_compression.hpp).
  CompressionTotals compression() const { return dictionaries_->totals(); }

  // Precondition: every job has a non-empty job_id, business and shard.
  // Postcondition: each job that is created, or exists in state delay, is in its shard's
  // pending set. One round trip for every shard's script calls (up to 500 jobs each, pipelined),
  // plus one SADD the first time this process meets a shard (register_shard()).
  std::vector<AcceptOutcome> accept(std::span<const NewJob> jobs, std::int64_t now_ms);
  // accept() in two halves, so that the caller works while Redis runs the calls (the ingest
  // stage's send-ahead, broker/ingest_path.hpp): accept_post() writes the calls and returns;
  // accept_collect() reads the replies of the earliest post not yet collected and returns what
  // accept() would have. Redis runs posts in the order they were made. Between the two, this
  // store's client may be used for nothing but more posts and collects (redis/client.hpp).
  // Either may throw what accept() throws; then every outstanding post is forgotten (whether it
  // ran is unknown: the caller writes its jobs again, which is idempotent) and the caller must
  // call abandon_posts() before any other call if it did not come from the client (a script
  // error). Lost scripts (NOSCRIPT, "Function not found") are loaded again and thrown as RedisIoError.
  struct PostedAccept;
  PostedAccept accept_post(std::span<const NewJob> jobs, std::int64_t now_ms);
  std::vector<AcceptOutcome> accept_collect(PostedAccept& posted);
  // Forgets every outstanding post (redis::RedisClient::abandon()). Never throws.
  void abandon_posts() noexcept;

  // Pending entries of one shard with after < deliver_at <= upto, ascending, at most `limit`.
  // The first read of a shard adds it to <prefix>:shards (see register_shard()).
  // after = nullopt means from the beginning; limit = 0 means no limit. Ties are returned in
  // job-id order (Redis's order). Scores that are not whole milliseconds are rounded up. One
  // round trip (pending.lua), after as many as it takes to move a 0.3 pending set into leaves
  // (500 entries each) the first time.
  std::vector<PendingEntry> pending_between(std::string_view shard, std::optional<std::int64_t> after,
                                            std::int64_t upto, std::size_t limit);

  // Claims jobs of one shard due by now_ms + ahead_ms for delivery, and sets aside in the same
  // call what cannot be delivered (storage/lua/claim.lua). One round trip. Result i is job_ids[i]'s.
  // A claim of kind deliver may be due up to ahead_ms after now_ms: the caller holds its record
  // until the wall clock reaches deliver_at (never early). seen_at[i], if given, is the score
  // job_ids[i]'s pending entry was read at (pending_between(), take_wakes()): how the claim finds
  // an entry whose record cannot say (none, unreadable, or settled: a stale entry).
  // Precondition: seen_at is empty or as long as job_ids.
  // delivered[i], if given and its attempt not 0, is a delivery the caller knows is in Kafka (a
  // takeover found its record in the shard's delivery log: broker/delivery_log.hpp): if job_ids[i]'s
  // in-flight entry names that attempt and, for a repeating job, that occurrence, the claim keeps
  // the attempt instead of counting a new one, and the caller settles the job without producing
  // it again. (The occurrence matters: every occurrence of a repeat is attempt 1, and an earlier
  // occurrence's delivery says nothing of the one in flight.)
  // Precondition: seen_at and delivered are empty or as long as job_ids.
  std::vector<Claim> claim(std::string_view shard, std::span<const std::string> job_ids, std::int64_t now_ms,
                           std::int64_t ahead_ms = 0, std::span<const std::int64_t> seen_at = {},
                           std::span<const KnownDelivery> delivered = {});
  // Every in-flight entry of the shard (HGETALL of its in-flight hash: at most the records a
  // broker had claimed and not settled). One round trip; an entry that does not parse is left out.
  std::vector<InFlightEntry> in_flight_entries(std::string_view shard);

  // After Kafka acknowledged: ready, payload dropped, entry removed. One round trip.
  // A delivered job as its claim described it; mark_ready() then writes the finished record
  // without reading the old one (storage/lua/mark_ready.lua).
  // mode: fast, a plain job (Claim::plain) whose business keeps no payload: the record is
  // written without being read; drop, the record is read (a repeat, a history) and its payload
  // dropped; keep, its payload is kept for a redelivery (the business reports back), and with an
  // ack_timeout its pending entry waits at now + ack_timeout (mark_ready.lua).
  enum class Mode { fast, drop, keep };
  struct Delivered {
    std::string job_id;
    std::int64_t deliver_at = 0;
    int attempt = 0;
    std::string business;
    Mode mode = Mode::fast;
    std::chrono::milliseconds ack_timeout{0};
    int max_attempts = 0;  // with an ack_timeout: deliveries before silence dead-letters the job
    // A repeating job's next occurrence, chosen by the broker from its claim's rule
    // (broker/repeat_plan.hpp): next_known false leaves it to the script (an interval goes on
    // its grid, the latest missed point; a calendar series cannot be computed in Lua and ends);
    // with next_known, nullopt ends the series.
    bool next_known = false;
    std::optional<Occurrence> next{};
    // Not delivered: the occurrence was missed and is skipped (repeat-catchup), the job goes on
    // at `next` with its attempt not counted, or ends failed if nothing is left.
    bool skip = false;
  };
  std::vector<Transition> mark_ready(std::string_view shard, std::span<const Delivered> jobs, std::int64_t now_ms);
  // The same for jobs known by id only: each record is read first.
  std::vector<Transition> mark_ready(std::string_view shard, std::span<const std::string> job_ids, std::int64_t now_ms);
  // A failed attempt that will be retried at retry_at: its pending entry re-scored to retry_at
  // so that a restart (or a retry beyond the load window) waits for the backoff too. The record
  // keeps its deliver_at. `refund`: the attempt does not count (see release.lua). `keep_firing`:
  // the record may be in Kafka, so the job stays in flight for cancels.
  struct ReleaseOptions {
    bool refund = false;
    bool keep_firing = false;
  };
  // `now_ms` stamps the retry in the job's history.
  Transition release(std::string_view shard, const std::string& job_id, std::string_view error, std::int64_t retry_at,
                     ReleaseOptions options, std::int64_t now_ms);
  // Attempts exhausted (the broker has already written the dead-letter record, at `dead_letter`
  // in the dead-letter topic, kept in the record as dl), or the payload unreadable.
  // keep_payload: the failed record keeps its payload (a business that keeps payloads), so that
  // retry_anywhere() can deliver it again.
  Transition mark_failed(std::string_view shard, const std::string& job_id, std::string_view reason,
                         std::int64_t now_ms, std::optional<DeadLetterAt> dead_letter = std::nullopt,
                         bool keep_payload = false);
  // Cancel by id in one shard: cancelled and removed from its pending set, if pending and not in
  // flight. An unknown id is remembered for remember_s seconds (0: not at all): a job that
  // arrives in this shard with that id within the time is accepted straight into cancelled.
  // version: the cancel record's offset in this shard; a job upserted from a later offset is left
  // alone (the cancel is read again), and an upsert from a later offset wins over the remembered
  // cancel (cancel.lua).
  Transition cancel(std::string_view shard, const std::string& job_id, std::int64_t now_ms, std::int64_t remember_s = 0,
                    std::optional<std::int64_t> version = std::nullopt);
  // Cancel by id wherever the job is: `home` (the cancel's own shard) first, then every known
  // shard. An id found nowhere is remembered in every known shard and in `home` (a job may come
  // through any partition; every owned shard is known once the loader has read it).
  // version: as cancel()'s, for `home` only (an offset orders nothing in another partition).
  Transition cancel_anywhere(std::string_view home, const std::string& job_id, std::int64_t now_ms,
                             std::int64_t remember_s = 0, std::optional<std::int64_t> version = std::nullopt);
  // A failed job delivered again from its kept payload, wherever it is (retry.lua): delay, due
  // at once, a new attempt; the shard's owner is woken. changed false with state failed: it
  // has no payload to deliver again (its business keeps none).
  Transition retry_anywhere(const std::string& job_id, std::int64_t now_ms);
  // An operator's action on many jobs of one shard (a bulk operation), each applied only if the
  // job is in the state the action is for, so that applying it again changes nothing: cancel
  // (cancel.lua: delay and not in flight), run_now (reschedule.lua to now_ms: delay, not in
  // flight), retry (retry.lua: failed with its payload). Result i is job_ids[i]'s. One round
  // trip per 500 jobs.
  enum class Action { cancel, run_now, retry };
  std::vector<Transition> act(Action action, std::string_view shard, std::span<const std::string> job_ids,
                              std::int64_t now_ms);
  // One page of each shard's walk (browse.lua), in one round trip. Reads only.
  std::vector<BrowsePage> browse(std::span<const std::pair<std::string, BrowseQuery>> walks, std::int64_t now_ms);
  // Moves a job that is delay and not in flight to a new deliver_at (reschedule.lua), wherever it
  // is (`home` first). The shard's owner is woken through its wake list (take_wakes()).
  // state in_flight: too late, its delivery is under way; missing: no shard has it.
  Transition reschedule_anywhere(std::string_view home, const std::string& job_id, std::int64_t deliver_at,
                                 std::int64_t now_ms);
  // Every shard in <prefix>:shards, sorted. One round trip.
  std::vector<std::string> shards() { return known_shards(); }
  // Where each job is: the first known shard holding a record for it, with that record's
  // business and attempt; nullopt if none. `likely[i]`, when given and not negative, is the
  // partition number whose shards (one per ingest topic) are read first for job i, the others
  // only if none of them holds it: a report keyed by its job-id, on a status topic with as
  // many partitions as the ingest topic, usually names its job's (broker/ingest_path.hpp). One
  // round trip, plus one for the list of shards and one for the jobs not in their likely shard.
  std::vector<std::optional<Located>> locate(std::span<const std::string> job_ids,
                                             std::span<const std::int32_t> likely = {});
  // Applies consumers' reports (report.lua). `where[i]` is reports[i]'s shard (from locate());
  // reports of no shard are unknown. One round trip per 500 reports of a shard, pipelined.
  std::vector<ReportOutcome> report(std::span<const Report> reports, std::span<const std::string> where,
                                    std::int64_t now_ms);
  // Pops each shard's wake list (ids whose pending entry another member moved) and reads their
  // entries now, where their records say (find.lua): what the owner must (re)load. One round
  // trip, and one more per shard with wakes. An id no longer pending is left out. The pop is not
  // undone when this throws: the caller must then reload the shards (Scheduler::reload()).
  std::vector<std::pair<std::string, std::vector<PendingEntry>>> take_wakes(std::span<const std::string> shards);
  // Sets aside claims of kind corrupt that Redis does not say are failed yet (the payload did
  // not decode): marked failed with their reason, in one call. Other kinds are ignored (the
  // claim script already set them aside). Safe to repeat.
  void set_aside(std::string_view shard, std::span<const Claim> claims, std::int64_t now_ms);

  // The shards whose record for job_id exists, `first` (if given and holding it) first.
  std::vector<std::string> shards_holding(const std::string& job_id, std::string_view first = {});
  // The job's fields as stored: state, deliver_at, attempt, business, shard and the named
  // fields (free text decoded), plus "key", "value" (each only if not null) and "headers"
  // (encoded) from its payload while it has one; nullopt if no shard has such a job (the first
  // found if several do). A record that does not parse gives {"error": ...}, a payload that
  // does not decode "payload_error".
  using Fields = std::map<std::string, std::string>;
  std::optional<Fields> get(const std::string& job_id);
  // get() for many jobs in one round trip (plus one for the list of shards).
  std::vector<std::optional<Fields>> get_many(std::span<const std::string> job_ids);
  StoreStats stats();
  // How many pending jobs fall due in each window, over every known shard: result[i] counts the
  // entries with bounds[i-1] < deliver_at <= bounds[i] (the first window has no lower end, so it
  // includes what is overdue). Precondition: bounds ascending. One round trip (plus one for the
  // list of shards); Redis reads each shard's leaves up to the last bound below any due time
  // (pending.lua).
  std::vector<std::int64_t> due_counts(std::span<const std::int64_t> bounds);

  // Fencing. After enable_fencing(member), the fenced calls (claim, release, mark_failed,
  // set_aside) of a shard need take_shard() first. `member` names this broker in the owner key
  // for people (no spaces). Precondition: called once, before any take_shard().
  void enable_fencing(std::string member);
  // Makes this store the shard's owner with a new, larger epoch (one round trip) and holds that
  // fence. Returns the epoch. Throws RedisIoError (retry later) like every call.
  std::int64_t take_shard(std::string_view shard, std::int64_t now_ms);
  // Forgets the fence (the shard was revoked); no I/O. Later fenced calls of it throw ShardFenced.
  void drop_shard(std::string_view shard);
  // The shards whose fence this store holds but Redis no longer confirms (another member took
  // them). One round trip. The caller must treat them as revoked (and drop_shard() them).
  std::vector<std::string> lost_shards();
  // The fence held for the shard, if any.
  std::optional<std::int64_t> fence(std::string_view shard) const;
  // Holds `epoch` (taken by another store of this broker: take_shard() there) as this store's
  // fence for the shard, or none (nullopt: drop_shard()); no I/O. A second connection of the
  // same owner (the claim stage's) writes under the owner's fence this way.
  void adopt_fence(std::string_view shard, std::optional<std::int64_t> epoch);

  // The layout of the keys under the prefix, as the version interlock reads it
  // (broker/version_interlock.hpp): 1 up to delayd 0.3 (which never wrote the key: its absence
  // reads as 1 where shards exist, as nothing where none do), 2 since 0.4 (waiting records in each
  // shard's hash, fenced in-flight entries). Reads the key and, unless a newer layout is there,
  // records `layout` and `version` in it. Returns what was there (layout 0: nothing yet). One or
  // two round trips.
  struct Layout {
    int layout = 0;
    std::string version;  // of the delayd that recorded it; "" when none did
  };
  Layout claim_layout(int layout, const std::string& version);

  // Adds the shard to <prefix>:shards once per process (tools, stats and cancels list shards
  // from it).
  void register_shard(std::string_view shard);

  const KeySchema& keys() const { return keys_; }

 private:
  // The scripts and what their callers must know of each: lua_scripts.hpp, kScripts.
  using Script = lua::Script;
  // The replies of one run(): job i's is calls[i / kJobsPerCall][i % kJobsPerCall], and its
  // record as read right after the call is records[i] (when run() was asked to read them).
  struct Replies {
    std::vector<redis::RedisReply> calls;
    std::vector<redis::RedisReply> reads;  // per call, with read_records: the HMGET of its jobs' records
    redis::ReplyView operator[](std::size_t i) const { return calls[i / kJobsPerCall].view()[i % kJobsPerCall]; }
    // Job i's record as read right after its call (read_records); the read's error reply when it
    // failed (the script has then given each job its own reason: claim.lua).
    redis::ReplyView record(std::size_t i) const {
      const redis::ReplyView all = reads[i / kJobsPerCall].view();
      return all.is_array() ? all[i % kJobsPerCall] : all;
    }
  };
  // Runs `script` over the jobs of one shard, kJobsPerCall per call, pipelined, reloading the
  // scripts if Redis lost them. per_job[i] are job i's arguments (the first is its id); `extra`
  // is ARGV[3]. read_records: the call's delay records are read (one HMGET of the shard's hash)
  // right after it, in the same round trip. Throws RedisCommandError if a call failed (a script error: a bug, or
  // a key of the shard that is not of delayd's type). A fenced script runs with this store's fence for the shard; a
  // refusal throws ShardFenced.
  Replies run(Script script, std::string_view shard, const std::vector<redis::Command>& per_job, std::int64_t now_ms,
              std::int64_t extra = 0, bool read_records = false);
  // One shard's jobs for run_shards(): per_job as run()'s, not owned.
  struct ShardJobs {
    std::string_view shard;
    const std::vector<redis::Command>* per_job;
  };
  // run() over several shards at once: every shard's calls in one pipeline (one round trip on
  // one Redis; a cluster router sends each node its part), result s is shards[s]'s. Throws as
  // run() does, for the first shard whose call failed; then nothing is known of the others.
  std::vector<Replies> run_shards(Script script, std::span<const ShardJobs> shards, std::int64_t now_ms,
                                  std::int64_t extra = 0, bool read_records = false);
  // The pipeline of run_shards(), before it is sent: groups[g] is one script call (and its read),
  // of shard shards[owner[g]].
  struct Calls {
    std::vector<std::string> shards;
    std::vector<std::vector<redis::Command>> groups;
    std::vector<size_t> owner;
    bool read_records = false;
  };
  Calls build_calls(Script script, std::span<const ShardJobs> shards, std::int64_t now_ms, std::int64_t extra = 0,
                    bool read_records = false) const;
  // The replies of `calls` (replies[g]: group g's), per shard; throws as run() does.
  std::vector<Replies> replies_of(const Calls& calls, std::vector<std::vector<redis::RedisReply>>& replies) const;
  // The dictionary accept()'s calls compressed payloads with, and the shards of those payloads.
  struct DictionaryUse {
    std::shared_ptr<const CompressionDictionary> dictionary;  // nullptr: none used
    std::set<std::string> shards;
  };
  // accept()'s calls; index[s] lists the positions in `jobs` of shard calls.shards[s]'s jobs.
  Calls accept_calls(std::span<const NewJob> jobs, std::int64_t now_ms, std::vector<std::vector<size_t>>& index,
                     DictionaryUse& used) const;
  // The writes that must go before accept()'s calls on the same connection (payload_compression.hpp:
  // the dictionary's key in each shard of `used` where this store has not written it yet, and
  // <prefix>:zdict once); `shards` gets the shards they write, and `prefix` whether the last
  // one is <prefix>:zdict's. Empty when nothing is due.
  std::vector<redis::Command> dictionary_writes(const DictionaryUse& used, std::vector<std::string>& shards,
                                                bool& prefix) const;
  // What the replies of dictionary_writes() tell: the shards (and the prefix) have the dictionary
  // from now on, or (an error reply) RedisCommandError.
  void dictionary_written(const DictionaryUse& used, const std::vector<std::string>& shards, bool prefix,
                          std::span<const redis::RedisReply> replies);
  // Loads, from the record's shard, each dictionary that a compressed payload among `records`
  // (shard, record as stored) names and this process has not loaded. One round trip, none when
  // nothing is missing; a dictionary not found stays unloaded (its payloads then read as corrupt).
  void load_dictionaries(std::span<const std::pair<std::string_view, std::string_view>> records);
  // What each job's accept did, from the replies (accept.lua's two forms); asked[i]: job i's
  // deliver_at as the caller gave it (asked_times()).
  static std::vector<AcceptOutcome> accept_outcomes(const std::vector<std::int64_t>& asked,
                                                    const std::vector<std::vector<size_t>>& index,
                                                    const std::vector<Replies>& replies);
  static std::vector<std::int64_t> asked_times(std::span<const NewJob> jobs);

 public:
  // What accept_post() sent, for its accept_collect().
  struct PostedAccept {
    std::vector<std::int64_t> asked;             // each job's deliver_at, as given (asked_times())
    Calls calls;                                 // its groups moved to the connection: left empty
    std::vector<size_t> sizes;                   // how many commands each of calls' groups held
    std::vector<std::vector<size_t>> index;      // as accept_calls()'s
    std::vector<std::string> registering;        // shards whose SADD (register_shard()) leads the post
    DictionaryUse dictionary;                    // the dictionary its payloads use, if any
    std::vector<std::string> dictionary_shards;  // dictionary_writes() after the SADDs: its shards,
    bool dictionary_prefix = false;              // and whether <prefix>:zdict's write ends them
  };

 private:
  // register_shard() in two halves: the command that adds shard to <prefix>:shards, and what
  // its reply tells: the shard is known from then on, or (an error reply) RedisCommandError.
  redis::Command registration(std::string_view shard) const;
  void registered(std::string_view shard, const redis::RedisReply& reply);
  // ARGV[4] of a call: the fence, or '' when fencing is off or the script is not fenced.
  std::string fence_arg(Script script, std::string_view shard) const;
  // Loads the library, or the scripts (the constructor's fallback, above). `starting`: called by
  // the constructor, when a replica's READONLY is not an error (the first call loads it).
  void load_scripts(bool starting = false);
  // Whether Redis (in a cluster: every primary) has this build's library already: FUNCTION
  // LIST LIBRARYNAME (a pattern; the name has no pattern characters). False on any error.
  bool library_loaded();
  // The start of a call of `script` with `keys` keys, as load_scripts() chose: FCALL <function>
  // <keys>, or EVALSHA <sha> <keys>. Its keys and arguments follow.
  redis::Command script_call(Script script, std::size_t keys) const;
  // Sends every group's commands in one pipeline and returns the replies group by group. A group
  // is a script call (FCALL or EVALSHA) and the commands that must run right after it (the reads
  // of its records). When Redis answers a group's call with "Function not found" or NOSCRIPT (it
  // lost the library or its script cache: a restart without persistence, FUNCTION DELETE, SCRIPT
  // FLUSH), that call did not run: the scripts are loaded again and those groups, and only those,
  // are sent once more. The one home of that rule.
  std::vector<std::vector<redis::RedisReply>> eval_groups(const std::vector<std::vector<redis::Command>>& groups);
  // The call of a batch script that takes no jobs (stride 0: browse, pending) on `shard`: its
  // kShardKeys keys, the kFixedArgs arguments (now, the retention, 0, no fence), then `own`.
  redis::Command shard_call(Script script, std::string_view shard, std::int64_t now_ms,
                            std::initializer_list<std::string> own) const;
  Transition one(Script script, std::string_view shard, redis::Command args, std::int64_t now_ms,
                 std::int64_t extra = 0);
  // Every shard in <prefix>:shards, sorted; `first` (if given, known or not) moved to the front.
  std::vector<std::string> known_shards(std::string_view first = {});
  // locate()'s reads: job i's record in shard k for each (i, k) of `reads`; out[i] is set from the
  // first pair of job i that finds one, unless it is set already. One round trip (two when a
  // header line is longer than the read).
  void locate_in(std::span<const std::string> job_ids, const std::vector<std::string>& shards,
                 std::span<const std::pair<size_t, size_t>> reads, std::vector<std::optional<Located>>& out);
  // Those of `shards` whose record for job_id exists, in that order. One round trip.
  std::vector<std::string> holding(const std::string& job_id, const std::vector<std::string>& shards);

  redis::RedisClient& redis_;
  KeySchema keys_;
  std::int64_t retention_s_;
  std::size_t compress_above_ = 0;                     // bytes of an encoded payload; 0: never compressed
  bool use_dictionary_ = false;                        // compress_payloads_above()'s `dictionary`
  std::shared_ptr<PayloadDictionaries> dictionaries_;  // the prefix's, shared in the process
  std::uint32_t dictionary_id_ = 0;                    // the dictionary whose keys this store has written:
  std::set<std::string> dictionary_shards_;            // in these shards,
  bool dictionary_prefix_ = false;                     // and as <prefix>:zdict (or found it there)
  ScriptCalls calls_;                                  // functions until load_scripts() finds Redis cannot have them
  std::vector<std::string> shas_;            // with ScriptCalls::eval: each script's SHA1, in kScripts's order
  std::set<std::string> registered_shards_;  // added to <prefix>:shards by this process
  std::optional<std::string> member_;        // set by enable_fencing()
  std::map<std::string, std::int64_t, std::less<>> fences_;  // shard -> epoch held
};

}  // namespace delayd::storage
