// FirePath: from "the wheel says it is due" to "Redis says ready".
//
//   fire_due()   once a job falls due within claim_ahead_ms, take it from the scheduler with
//                those due up to claim_gather_ms later; claim them in
//                Redis (with a ClaimWorker: handed to its thread and connection, up to
//                kMaxClaimRounds rounds ahead, and dispatched when their results come back at
//                a later fire_due(); without one, here and now)
//                (one script call per shard: the payload comes back, the attempt is
//                counted, a cancel now answers in_flight, and what cannot be delivered is set
//                aside in the same call); hold each record in memory until the wall clock
//                reaches its deliver_at (send_prepared(), no I/O), then hand it to the producer
//                without waiting for room in its queue. Claiming ahead takes the Redis round
//                trip out of the moment of delivery: at the due instant only the producer
//                call is left, so a slow ingest batch or refill cannot make a record late. Jobs
//                that cannot be delivered (finished already, corrupt, no readable record) are set
//                aside in Redis after the dispatch loop, which itself does no I/O and cannot
//                throw half-way through a batch.
//   on_report()  the producer's report handler forwards reports of this path's tags here.
//   settle()     acknowledged records: mark ready (one script call per shard; with a MarkWorker,
//                handed to its thread and connection, and applied when its result comes back
//                at a later settle(), so the loop claims while marks are in flight); the others
//                by what Kafka said (connectors::DeliveryError), see decide() below.
//
// What a failed delivery costs (the attempt counter is what max_attempts limits):
//   transient            nothing written: retried after retry_outage_ms, attempt refunded, a
//                        cancel may win meanwhile. An outage delays jobs; it never fails them.
//   possibly_persisted,  maybe written: retried the same way, but the job stays in flight in
//   fatal                Redis (firing_at kept) so that no cancel can win against a record that
//                        may be in the ready topic; the retry settles it (at worst a duplicate).
//   unknown_topic        the ready topic does not exist (deleted under delayd, or not created
//                        yet): one cause for all its jobs, not a fault of any. Attempt refunded,
//                        retried after retry_outage_ms; logged once per topic (MissingTopics),
//                        shown by missing_topics() (the service makes it an outage on /healthz);
//                        on_missing_topic asks for it to be created again when creation is on.
//                        Dead-lettered only once the topic has been missing for
//                        missing_topic_timeout (kafka.missing_topic_timeout_ms).
//   permanent            refused for good (authorization, invalid record, policy): counts;
//                        retried with exponential backoff until max_attempts, then dead-lettered.
//   too_large            retrying cannot help: dead-lettered at once, without its value.
// Dead-letter copies: the job's record with an `error` header, on the DLQ topic; only once Kafka
// acknowledged the copy is the job marked failed. A copy refused as too large is sent again
// without its value (header `value-bytes` says how large it was), then without key and carried
// headers; a copy that fails otherwise sends the job round again (attempt refunded).
//
// The ready record: on the topic the configured template names for the job's business; the
// job's key and value, the producer's headers (less deliver-at, job-id, attempt, business and
// repeat), then business, job-id, deliver-at (epoch ms), attempt (from 1), and repeat (the
// occurrence, from 1) for a repeating job.
//
// The lifecycle (docs/consuming.md, "Job lifecycle"; the business's policy, config/business_policy.hpp):
// a claim may come back marked dead (a failed report used the last attempt) or as a
// redelivery after an ack timeout beyond max_process_attempts: it is dead-lettered like a job
// out of Kafka attempts. A record is held until its not_before (a retry's time, an ack
// deadline), never only until deliver_at. Once Kafka acknowledged it, mark_ready keeps the
// payload if the business does, and the job is offered to the scheduler again when Redis says
// it has a next time: a repeat's next occurrence, or an ack deadline.
//
// Back-pressure: with max_unsettled records awaiting their reports (Kafka slow or down),
// fire_due() takes nothing: due jobs wait in the wheel (late, never lost) and stuck() tells the
// service to pause ingest.
// Fencing (storage/job_store.hpp): a claim, retry or failure that Redis refuses because another
// member took the shard (ShardFenced) makes this path give the shard up at once (lose()): its
// waiting jobs leave the wheel, its held records are dropped unsent, and reports of records
// already produced still mark them ready. A record held back longer than fence_recheck (the
// loop was stopped or starved meanwhile, e.g. SIGSTOP past the session timeout) is sent only
// after Redis confirmed the fences again, so a paused broker that wakes up produces nothing
// for shards that moved. A dead-letter copy is written only for a shard still ours.
// Outages: if Redis fails mid-way, nothing already acknowledged is forgotten: reports stay
// queued until settle() gets through, and jobs whose claim failed go back to the wheel. Every
// step may be repeated (see storage/job_store.hpp for the crash points).
// Threading: the scheduling loop's thread, like the scheduler and producer it uses; the
// ClaimWorker and MarkWorker, if given, run their Redis calls on threads of their own
// (fire_stages.hpp), and every result is applied here.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "broker/dead_letter.hpp"
#include "broker/delivery_tags.hpp"
#include "broker/fire_stages.hpp"
#include "broker/job_spans.hpp"
#include "broker/log_throttle.hpp"
#include "broker/loop_counters.hpp"
#include "broker/missing_topics.hpp"
#include "broker/record_sink.hpp"
#include "broker/scheduler.hpp"
#include "broker/snapshot.hpp"
#include "broker/wall_clock.hpp"
#include "config/business_policy.hpp"
#include "storage/job_store.hpp"
#include "telemetry/tracer.hpp"

namespace delayd::broker {

// The settings' defaults come from config/config.hpp (their one home); loop_settings.cpp fills in
// a configuration's values.
struct FireOptions {
  int max_attempts = static_cast<int>(config::SchedulerConfig{}.max_attempts);
  std::int64_t retry_backoff_ms = config::SchedulerConfig{}.retry_backoff_ms;
  std::int64_t retry_backoff_max_ms = config::SchedulerConfig{}.retry_backoff_max_ms;
  // repeat-catchup all: missed occurrences delivered in a row at most (broker/repeat_plan.hpp).
  std::int64_t max_catchup = config::SchedulerConfig{}.max_catchup;
  std::string dlq_topic = config::KafkaConfig{}.dlq_topic;
  std::int64_t retry_outage_ms = 1000;  // retry delay of every failure that costs no attempt
  std::size_t max_unsettled = 100'000;  // fire_due() pauses while this many await reports
  std::string ready_topic_template = config::KafkaConfig{}.ready_topic_template;  // a job's business's topic
  // How long before its deliver_at a job is claimed; its record then waits in memory. A cancel
  // that arrives within this time of the deliver_at is late (answered in_flight). 0: claim at
  // the due instant.
  std::int64_t claim_ahead_ms = 0;
  // When a job falls due within claim_ahead_ms, its claim round also takes the jobs due up to
  // this much later (ms; 0: only those within claim_ahead_ms), so a cancel up to claim_ahead_ms +
  // claim_gather_ms before a job's deliver_at may be late. Fewer, larger claim calls under load.
  std::int64_t claim_gather_ms = 0;
  // Jobs per claim or mark call. Between two calls the held-back records that have fallen due
  // are sent, so a due record waits behind one call at most (about 2 ms for 200 jobs).
  std::size_t jobs_per_call = 200;
  // The wall clock, read between calls (the loop's clock; injectable for tests).
  std::function<std::int64_t()> clock = system_now_ms;
  // A record held back longer than this since its claim is sent only after the fences are
  // checked again (one round trip). Must stay well below the consumer's session timeout, so
  // that a pause long enough to lose the shards is always caught.
  std::chrono::milliseconds fence_recheck{1000};
  // What each business's jobs do after delivery (defaults: nothing kept, no ack timeout).
  config::BusinessPolicies policies;
  // A ready topic that does not exist: its jobs wait (attempts refunded) until it has been
  // missing this long, then are dead-lettered (kafka.missing_topic_timeout_ms).
  std::chrono::milliseconds missing_topic_timeout{config::KafkaConfig{}.missing_topic_timeout_ms};
  // Called with the topic when a ready topic is first found missing (each time it goes missing
  // again after being back); the service asks the topic creator to create it again when
  // kafka.create_topics is on. Empty: nothing is asked.
  std::function<void(const std::string&)> on_missing_topic;
  // etf1 (docs/producing.md "etf1 records"): after a job read from one of these topics is delivered, a
  // tombstone of its schedule goes to the topic, in the schedule's partition (empty: none,
  // etf1.tombstone_on_fire off); and a copy of the delivered record to etf1_history_topic
  // (empty: none). Both after Kafka acknowledged the ready record and Redis marked it, and not
  // waited for: a crash before them loses them, never the delivery (the schedule is not
  // delivered again: its offset is committed or its version is known).
  std::set<std::string, std::less<>> etf1_tombstone_topics;
  std::string etf1_history_topic;
  // With kafka.delivery = exactly_once: the follow-ups go out with their job's ready record, in
  // its transaction, instead of after its mark (and a takeover that finds the record finds them).
  bool follow_ups_with_record = false;
  // Traces (broker/job_spans.hpp): a publish span per ready record produced, whose context the
  // record's traceparent names. Null: off, and the producer's traceparent passes unchanged.
  telemetry::Tracer* tracer = nullptr;
};

// FireCounters: broker/loop_counters.hpp.

// The fire path's stages beside the loop (fire_stages.hpp); either may be null: its calls are
// then made on the loop's thread, one round trip per shard, waiting for each.
struct FireWorkers {
  ClaimWorker* claims = nullptr;
  MarkWorker* marks = nullptr;
};

// What to do with a ready record's failed report; pure, so that the table above is testable.
struct FailureAction {
  enum class Kind { retry, dead_letter } kind = Kind::retry;
  bool refund = false;       // the attempt does not count
  bool keep_firing = false;  // the record may be in Kafka: no cancel may win until settled
  bool strip_value = false;  // the dead-letter copy goes without the value
  std::int64_t delay_ms = 0;
};
// `topic_missing_for`: with unknown_topic, how long the record's topic has been missing.
FailureAction decide(connectors::DeliveryError error, int attempt, const FireOptions& options,
                     std::chrono::milliseconds topic_missing_for = std::chrono::milliseconds(0));

class FirePath {
 public:
  // Rounds of claims (one take_due() batch: a claim call per shard) handed to the ClaimWorker
  // and not yet all back, at most: while one round runs in Redis, the loop dispatches the one
  // before and gathers the next, so each round takes everything that fell due meanwhile (the
  // batches grow with the load instead of the calls multiplying).
  static constexpr std::size_t kMaxClaimRounds = 2;

  FirePath(Scheduler& scheduler, storage::JobStore& store, RecordSink& sink, FireOptions options,
           FireWorkers workers = {});

  // Returns how many records were handed to the producer (including those send_prepared()
  // found due). May throw storage errors; what was claimed before the error is kept.
  std::size_t fire_due(std::int64_t now_ms);
  // Hands the claimed records whose deliver_at <= now_ms to the producer. No I/O, no throw
  // (a refusal comes back as a report): cheap enough to call between any two pieces of work.
  std::size_t send_prepared(std::int64_t now_ms);
  // How long until fire_due() starts a claim round (0: at once): until the next held job falls
  // due within claim_ahead_ms, or at once for a job filed for a time an earlier round had looked
  // past (Scheduler::overdue()). nullopt: no job held. No I/O.
  std::optional<std::int64_t> claim_wait_ms(std::int64_t now_ms) const;
  // The deliver_at of the earliest claimed record still held back, if any.
  std::optional<std::int64_t> next_prepared() const;
  // Claimed records held back until their deliver_at.
  std::size_t prepared() const { return prepared_.size(); }
  void on_report(const connectors::DeliveryReport& report);
  // Applies the marks the MarkWorker finished, then settles the queued reports (marks handed to
  // the worker, or written here without one). May throw storage errors: every report whose
  // outcome is not written stays queued (a failed mark's report is queued again).
  void settle(std::int64_t now_ms);
  // settle(), then waits up to `timeout` for the claims and marks in flight and applies them (a
  // revoke or a stop: so that the next owner finds the jobs ready). May throw like settle().
  void settle_all(std::chrono::milliseconds timeout);
  // Claims or marks are with the stages: their results will need applying (the loop waits for
  // them, woken by the stages).
  bool stages_busy() const { return !claims_.empty() || !marks_.empty(); }
  // fire_due() takes nothing more from the wheel until a claim in flight comes back.
  bool claims_full() const { return claimer_ != nullptr && rounds_.size() >= kMaxClaimRounds; }
  // Gives the shard up because another member owns it now (Redis refused our fence, or Kafka our
  // transactions): revoked in the scheduler, fence dropped, its records' stream closed as lost.
  // Idempotent. No I/O.
  void lose(const std::string& shard);
  // The shards lose() gave up since the last call, each once, whether the scheduler held them
  // or their stream was still opening (Ownership forgets them as opening, and takes them again if
  // the consumer group still says they are ours once the group has had time to say otherwise).
  std::vector<std::string> take_lost();
  // A takeover's finding (RecordSink::opened()): these in-flight deliveries of an earlier epoch
  // reached Kafka. Their claims keep their attempt (storage/lua/claim.lua), and each is settled
  // as delivered (or dead-lettered) without producing its record again. Precondition: the shard
  // is not loaded in the scheduler yet.
  void recover(const std::string& shard, const std::vector<LoggedDelivery>& delivered);

  // Records handed to Kafka whose outcome is not yet written to Redis.
  std::size_t unsettled() const { return in_flight_.size(); }
  // Kafka is not keeping up: fire_due() takes nothing until reports come back.
  bool stuck() const { return in_flight_.size() >= options_.max_unsettled; }
  // The last delivery failure that was Kafka's fault rather than the record's (transient,
  // possibly persisted, fatal, refused: a failed login or a missing Write ACL), while no record has been delivered
  // since: a Kafka outage as the fire path sees it. nullopt while deliveries succeed.
  // A refusal (a missing Write ACL on one topic, a failed login) is kept per topic until a record
  // to that topic is delivered, so that other topics' deliveries do not end it, and it is named
  // after the outage of the whole.
  std::optional<std::string> delivery_outage() const {
    if (delivery_outage_ || refused_topics_.empty()) return delivery_outage_;
    return refused_topics_.begin()->second;
  }
  // The ready topics Kafka says do not exist, while their jobs wait for them.
  const MissingTopics& missing_topics() const { return missing_topics_; }
  const FireCounters& counters() const { return counters_; }
  // How late each ready record was handed to Kafka (its send time - its deliver_at).
  const DurationHistogram& lateness() const { return lateness_; }
  // From each ready record's produce() to its delivery report.
  const DurationHistogram& produce_latency() const { return produce_latency_; }

 private:
  struct InFlight {
    Scheduler::Slot slot;
    std::string job_id;
    int attempt = 0;
    std::int64_t deliver_at = 0;
    std::string business;
    bool plain = true;                                    // Claim::plain: mark_ready may take the fast way
    connectors::OutRecord record;                         // kept for the dead-letter copy if every attempt fails
    std::string reason;                                   // set once the job is on its way to the dead-letter topic
    std::chrono::steady_clock::time_point claimed_at{};   // when Redis last confirmed our fence
    std::chrono::steady_clock::time_point produced_at{};  // when handed to the producer
    bool marking = false;                                 // its mark is with the MarkWorker: settle() leaves it alone
    int repeat = 0;                                       // Claim::repeat: the occurrence's number
    storage::RepeatRule rule{};                           // Claim::rule: a repeat's rule (long form)
    PublishTrace trace{};                                 // the last produce()'s span (tracing on)
    bool recovered = false;  // delivered by an earlier owner (recover()): settled, never produced
  };
  // A mark handed to the MarkWorker: its records, by tag, with their reports (queued again if
  // the mark fails).
  struct PendingMark {
    std::vector<std::uint64_t> tags;
    std::vector<connectors::DeliveryReport> reports;
  };
  // The etf1 tombstone and history copy of a job of `shard` just delivered and marked (FireOptions).
  void after_etf1_delivery(const InFlight& f, const std::string& shard);
  // Applies the MarkWorker's finished marks; rethrows the first failure after re-queueing.
  void apply_marks();
  // A claim handed to the ClaimWorker: the slots it claims (taken from the scheduler).
  struct PendingClaim {
    std::vector<Scheduler::Slot> slots;
    std::int64_t now_ms = 0;
    std::uint64_t round = 0;  // the submit_claims() call it came from
  };
  // Hands the claims of `slots` (taken from the scheduler) to the ClaimWorker, one per shard run;
  // `ahead_ms`: how far ahead of now_ms they were taken (the claim takes nothing due later).
  void submit_claims(const std::vector<Scheduler::Slot>& slots, std::int64_t now_ms, std::int64_t ahead_ms);
  // Dispatches the ClaimWorker's finished claims; a failed one's jobs go back to the wheel (or
  // are given up, fenced), and the first outage is rethrown after all are handled.
  std::size_t apply_claims();
  // What a claim of `slots` returned (claimed[i]: claims[i] is an answer): records held back or
  // dead-lettered, early ones back to the wheel, the rest set aside. Returns records produced.
  std::size_t dispatch(const std::vector<Scheduler::Slot>& slots, std::vector<storage::Claim>& claims,
                       const std::vector<bool>& claimed, std::int64_t now_ms);
  // The mark of the jobs of `index` (into tags) succeeded with `marked`: follow-ups, counters.
  void marked(const std::vector<std::uint64_t>& tags, const std::vector<storage::Transition>& marked);
  // Held records older than fence_recheck: drop those of shards that moved, keep the rest.
  void recheck_fences();
  std::int64_t backoff(int attempt) const;
  // Indices into `slots`, grouped by the shard of each slot's job, in runs of at most
  // jobs_per_call (one store call each).
  std::vector<std::pair<std::uint32_t, std::vector<size_t>>> by_shard(const std::vector<Scheduler::Slot>& slots) const;
  std::string shard_of(Scheduler::Slot slot) const;
  // Whether the job's shard is still ours, by the scheduler and by Redis (one round trip).
  bool still_ours(Scheduler::Slot slot);
  // Hands the record to the sink; `late_ms`: how late a ready record is as it goes (0 for the
  // other kinds), which a transactional sink lingers by (ShardStream::Options::late_linger_ms).
  void produce(InFlight entry, TagKind kind, std::int64_t late_ms = 0);
  // produce() of a ready record with tracing on: a publish span begins, the record goes with its
  // context as traceparent, and keeps the producer's own headers for a retry or dead letter.
  void produce_traced(InFlight& f, const std::string& shard, std::int64_t late_ms);
  // The publish span of the ready record `f` ends with its delivery report.
  void end_span(InFlight& f, const connectors::DeliveryReport& report);
  // The delivery recover() found logged for each of `slots`' jobs at `index` (attempt 0: none),
  // for the claim call.
  std::vector<storage::KnownDelivery> known_delivered(const std::vector<Scheduler::Slot>& slots,
                                                      const std::vector<size_t>& index) const;
  // A claim of a job recover() found delivered with this attempt and occurrence: settled as that
  // delivery (an ok report queued for its mark, or its dead letter's), nothing produced. False if
  // `entry` is not one.
  bool settle_recovered(InFlight& entry, const std::string& shard);
  // Claims the jobs of `slots` (taken from the scheduler) and holds or sends their records.
  std::size_t claim_and_dispatch(const std::vector<Scheduler::Slot>& slots, std::int64_t now_ms, std::int64_t ahead_ms);
  void set_aside(const std::vector<Scheduler::Slot>& slots, const std::vector<storage::Claim>& claims,
                 std::int64_t now_ms);
  void handle_failure(std::uint64_t tag, const connectors::DeliveryReport& report, std::int64_t now_ms);
  void handle_dead_letter_report(std::uint64_t tag, const connectors::DeliveryReport& report, std::int64_t now_ms);
  void dead_letter(InFlight entry, std::string reason, bool strip_value, DeadLetterReason why);
  void retry(InFlight& f, const std::string& error, const FailureAction& action, std::int64_t now_ms);
  // A delivery to `topic`, handed to the producer at `sent_ms` (wall), failed as unknown: counts
  // it in missing_topics_ (logging and asking for the topic on the first failure); returns how
  // long the topic has been missing (0 for a straggler of an outage that ended: not counted).
  std::chrono::milliseconds note_missing_topic(const std::string& topic, std::int64_t now_ms, std::int64_t sent_ms);
  // now_ms: when Kafka acknowledged it; a repeat's next occurrence is chosen for that instant.
  storage::JobStore::Delivered delivered(const InFlight& f, std::int64_t now_ms) const;
  // A repeat's occurrence that `now_ms` has overtaken (repeat_plan.hpp's skip()), or that
  // expired (max-lateness-ms; after_expired()), as the skip to write instead of delivering it;
  // nullopt: deliver it.
  std::optional<storage::JobStore::Delivered> missed(const InFlight& f, bool expired, std::int64_t now_ms) const;
  // Writes the skips (mark_delivered.lua with skip) and moves their slots on: to the occurrence
  // the series goes on at, or released. A Redis failure meets them again shortly.
  void skip_missed(const std::vector<Scheduler::Slot>& slots, const std::vector<storage::JobStore::Delivered>& jobs,
                   std::int64_t now_ms);
  // After mark_ready: the job's next time in Redis (a repeat, an ack deadline) goes to the wheel.
  void follow_up(const InFlight& f, const storage::Transition& marked);

  Scheduler& scheduler_;
  storage::JobStore& store_;
  RecordSink& sink_;
  FireOptions options_;
  ClaimWorker* claimer_;
  MarkWorker* marker_;
  std::unordered_map<std::uint64_t, PendingClaim> claims_;  // by ClaimWorker request id
  std::map<std::uint64_t, std::size_t> rounds_;             // round -> its claims not back yet
  std::unordered_map<std::uint64_t, PendingMark> marks_;    // by MarkWorker request id
  std::uint64_t follow_up_seq_ = 0;                         // tags of etf1 follow-up records
  std::uint64_t stage_seq_ = 0;                             // request ids of both stages
  std::unordered_map<std::uint64_t, InFlight> in_flight_;
  std::multimap<std::int64_t, InFlight> prepared_;  // by deliver_at (epoch ms): claimed, not yet due
  std::deque<connectors::DeliveryReport> reports_;
  std::uint64_t seq_ = 0;
  FireCounters counters_;
  std::optional<std::string> delivery_outage_;
  std::map<std::string, std::string> refused_topics_;  // topic -> its refusal, until a delivery to it
  MissingTopics missing_topics_;
  LogThrottle refused_log_{std::chrono::seconds(10)};  // counted delivery failures
  bool recheck_ = false;  // send_prepared() met a record held too long: recheck_fences() first
  // recover()'s findings not claimed yet: shard -> job-id -> the logged delivery.
  std::map<std::string, std::map<std::string, LoggedDelivery, std::less<>>, std::less<>> recovered_;
  std::vector<std::string> lost_;  // lose()'s shards since the last take_lost()
  DurationHistogram lateness_;
  DurationHistogram produce_latency_;
};

}  // namespace delayd::broker
