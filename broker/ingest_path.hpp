// IngestPath: makes batches of ingest records durable, in record order, and says when their
// offsets may be committed.
//
//   schedule  accepted in Redis (record and pending entry in one script call per shard; see
//             storage/job_store.hpp), then
//             offered to the wheel's owner (WheelFeed), which holds it if it is due within the
//             shard's loaded horizon (the ingest half of the horizon invariant, scheduler.hpp;
//             across threads, handover.hpp).
//   cancel    cancelled in Redis if still pending and not in flight, then dropped from the wheel.
//             The job is looked for in the cancel's own shard first, then in every known shard
//             (<prefix>:shards). An id found nowhere is remembered for cancel_memory_s in every
//             known shard, the cancel's own included (JobStore::cancel_anywhere): a job that
//             arrives in any of them in time is accepted straight into cancelled, never
//             delivered. A cancel whose job came earlier in the same batch and is not written
//             yet is written first, in its shard only, so that the job is accepted straight into
//             cancelled: a job due already (both read late, after an outage) is never offered to
//             the wheel, where its claim could beat the cancel.
//   reschedule  moved in Redis if still pending and not in flight (its shard's owner is woken
//             through the wake list; if that is this instance, the timer moves at once). Too
//             late (in flight) or unknown: logged and counted, nothing else.
//   report    (a record of the status topic, read by the same consumer) applied in Redis
//             (storage kReport) with the job's business's policy: running, finished, failed
//             with a retry at the backoff or dead. Reports that do not fit the job's state are
//             ignored and counted; so are reports for unknown jobs. Applied in batches, in
//             order with the ingest records around them. A report for a job in flight (the
//             consumer read its record before Kafka's acknowledgement reached delayd) waits,
//             holding its batch's offsets, until the delivery is settled, then applies.
//   invalid   copied to the dead-letter topic with an `error` header saying why, plus
//             source-topic, source-partition and source-offset headers (also a status record
//             without job-id or with an unknown status).
//
// Commits. process() returns once the batch's jobs and cancels are in Redis (with send-ahead,
// once its last accepts are posted: the batch is done when they are collected); it does not wait
// for Kafka to acknowledge the dead-letter copies (that could take as long as Kafka's message
// timeout, and the scheduling loop must not wait). A batch's offsets become committable when
// every dead-letter copy of it is acknowledged and every batch before it is committable too;
// take_committable() hands them out in order. A copy refused as too large is sent again
// smaller (dead_letter.hpp); one that fails otherwise is sent again after a backoff (1 s
// doubling to 30 s), so an invalid record is never lost and never blocks the others' jobs.
// backlogged() says when too many batches wait on Kafka: the service then pauses reading.
//
// Outages: on a Redis outage process() throws; the caller calls it again with the same batch
// later, and it resumes: schedules after the last completed Redis write are written again
// (idempotent by job-id) and records already dead-lettered are not copied twice. "The same
// batch" is the same records, first, last and count; any other read starts afresh.
//
// Send-ahead (IngestOptions::send_ahead). The accepts that end a batch (all of a plain batch of
// schedules) are posted (JobStore::accept_post) and process() returns without their replies; the
// next process() posts its own and then collects the earlier ones, so that Redis runs one batch
// while this thread reads and parses the next. Everything else that needs Redis (an accept that
// is not posted, a cancel, also one that goes before its job's accept, a reschedule, a report,
// a retry, settle()) first collects what is posted: each reaches the store through store(),
// which settles first (only the post, its collect and abandon() use the store directly). A
// posted batch is not processed (its offsets wait) until its replies are read and its jobs
// offered to the wheel; an error in between forgets every posted batch (abandon()), and the
// caller processes them again, in order, like a batch an outage interrupted. Redis runs posts in order on the
// one connection, so the order of writes is the order of records, as without send-ahead.
// Off when replicas must acknowledge (WAIT must follow the writes it covers).
//
// Replicas (redis.wait_replicas > 0): before process() returns, and so before the batch's
// offsets can become committable, it waits until that many replicas of every Redis primary
// written to acknowledge the writes (WAIT). Too few within the timeout is an outage like any
// other (process() throws), except that the retry writes the whole batch again, from its first
// record not yet acknowledged: after a failover the new primary may lack those writes.
//
// Ready topics: when creation is on, a job's ready topic is asked of the TopicCreator (never
// waited for). A business outside rules.allowed_businesses, or one that would need a new topic
// beyond the creator's cap, is dead-lettered with the reason.
// Threading: one thread (the ingest thread, broker/ingest_stage.hpp); everything it tells the
// wheel goes through the WheelFeed it was given.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/backoff.hpp"
#include "broker/dead_letter.hpp"
#include "broker/job_spans.hpp"
#include "broker/loop_counters.hpp"
#include "broker/topic_creator.hpp"
#include "broker/wheel_feed.hpp"
#include "config/business_policy.hpp"
#include "connectors/kafka_producer.hpp"
#include "contract/ingest_parse.hpp"
#include "storage/job_store.hpp"
#include "telemetry/tracer.hpp"

namespace delayd::broker {

// The settings' defaults come from config/config.hpp (their one home).
struct IngestOptions {
  contract::IngestRules rules;
  // The format of each ingest topic (config::ingest_topics()); a topic not listed is delayd's.
  std::map<std::string, config::IngestFormat, std::less<>> formats;
  std::string dlq_topic = config::KafkaConfig{}.dlq_topic;
  std::size_t max_waiting_batches = 64;  // backlogged() beyond this many uncommittable batches
  // how long a cancel for an unknown id is remembered
  std::int64_t cancel_memory_s = config::SchedulerConfig{}.cancel_memory_s;
  std::string status_topic;           // records of this topic are reports; empty: none
  config::BusinessPolicies policies;  // what a report does to each business's jobs
  // Durability: the client the store writes through, and how many replicas must acknowledge each
  // batch's writes before it may be committed (0 or no client: no wait).
  redis::RedisClient* wait_on = nullptr;
  int wait_replicas = static_cast<int>(config::RedisConfig{}.wait_replicas);
  int wait_timeout_ms = static_cast<int>(config::RedisConfig{}.wait_timeout_ms);
  // Traces (broker/job_spans.hpp): an accept span per schedule, a child of its record's
  // traceparent. Null: off.
  telemetry::Tracer* tracer = nullptr;
  // Post a batch's final accepts and collect them with the next batch's (see the top). Ignored
  // (off) when wait_replicas > 0.
  bool send_ahead = true;
};

// IngestCounters: broker/loop_counters.hpp.

class IngestPath {
 public:
  using Offsets = std::vector<std::pair<connectors::TopicPartition, std::int64_t>>;  // next offset to read

  // topics may be null (ready topics are not created). `wheel` learns of every job accepted,
  // cancelled or moved, after Redis acknowledged it.
  IngestPath(WheelFeed& wheel, storage::JobStore& store, connectors::KafkaProducer& producer, TopicCreator* topics,
             IngestOptions options);

  // Precondition: batch is not empty. With send-ahead it may return with this batch posted
  // (in_flight() == 1); then it has collected every batch posted before.
  // Postcondition: in_flight() <= 1, and any posted batch is this one.
  void process(std::span<const connectors::Record> batch, std::int64_t now_ms);
  // Collects every posted batch: its jobs offered to the wheel, the batch processed. Throws
  // storage errors; then every posted batch is forgotten (as abandon()), to be processed again.
  void settle();
  // Whether process() is done with this batch (its offsets wait only for dead letters, or are
  // committable), as far as this path still remembers it. A batch is its records: a read with
  // the same first record but a different last one is another batch. Precondition: batch is
  // not empty.
  bool processed(std::span<const connectors::Record> batch) const;
  // Batches posted and not collected (0 or 1 between calls).
  std::size_t in_flight() const { return posted_.size(); }
  // Forgets the posted batches (their replies are never read; the store's connection drops
  // them): the caller processes those batches again, in order. Never throws.
  void abandon() noexcept;
  void on_report(const connectors::DeliveryReport& report);
  // Sends again the dead-letter copies whose backoff has passed.
  void retry_dead_letters();
  // Tries again, every 20 ms, the reports that arrived while their job's delivery was not settled
  // yet (a consumer faster than Kafka's acknowledgement to delayd), and the upserts of jobs in
  // flight. A report that still waits after 2 minutes is counted ignored; an upsert waits as
  // long as it takes (a delivery settles or is retried). May throw storage errors (they stay
  // waiting).
  void retry_waiting(std::int64_t now_ms);
  // The offsets of the batches that are done, oldest first, in one list (later entries of a
  // partition supersede earlier ones); they are forgotten here once taken.
  Offsets take_committable();
  bool backlogged() const { return batches_.size() >= options_.max_waiting_batches; }
  std::size_t waiting_dead_letters() const { return dead_letters_.size(); }
  const IngestCounters& counters() const { return counters_; }

 private:
  struct Batch {
    std::uint64_t id = 0;
    Offsets offsets;
    std::size_t outstanding = 0;  // dead-letter copies not yet acknowledged
    bool processed = false;       // process() has returned for it
    // Resume point after an outage: records before `resume` are in Redis; those in
    // `dead_lettered` have their copy on the way.
    std::string records;  // span_of() its records ("<first>..<last>#<count>"), to know a retry
    std::size_t resume = 0;
    std::size_t replicated = 0;  // records before this one are acknowledged by the replicas
    std::set<std::size_t> dead_lettered;
  };
  struct DeadLetter {
    std::uint64_t batch = 0;
    connectors::OutRecord record;
    std::int64_t retry_at = 0;  // steady-clock ms when waiting for a retry; 0 while in flight
    base::Backoff backoff{std::chrono::seconds(1), std::chrono::seconds(30)};  // between failed writes
  };
  // A batch's final accepts, posted: collect_one() reads their replies (oldest first).
  struct Posted {
    std::uint64_t batch = 0;  // its Batch's id
    std::size_t end = 0;      // its records: the resume point once collected
    std::vector<storage::NewJob> jobs;
    std::vector<AcceptTrace> traces;  // as accept_traces_
    storage::JobStore::PostedAccept call;
  };
  Batch& batch_for(std::span<const connectors::Record> batch);
  Batch& batch_by_id(std::uint64_t id);
  void flush_accepts(Batch& b, std::size_t next, std::int64_t now_ms);
  // accepts_ (the rest of b, up to `end`) posted; then the batch posted before, if any, collected.
  void post_accepts(Batch& b, std::size_t end, std::int64_t now_ms);
  void collect_one();
  // What accepting `jobs` did, handed to the wheel and counted; b waits for their upserts in flight.
  void apply_accepts(Batch& b, const std::vector<storage::NewJob>& jobs, std::vector<AcceptTrace>& traces,
                     const std::vector<storage::AcceptOutcome>& outcomes);
  // WAIT for options_.wait_replicas replicas; on failure b.resume goes back to b.replicated.
  void wait_for_replicas(Batch& b, std::size_t end);
  // A cancel read from `shard` at `offset`: with `anywhere`, the job is looked for there first,
  // then in every shard; with `own_shard`, only there (its job is in this batch, not written yet).
  enum class CancelScope { anywhere, own_shard };
  void cancel(const std::string& shard, const std::string& job_id, std::int64_t offset, std::int64_t now_ms,
              CancelScope scope);
  // accepts_ holds a schedule (not an upsert) of `job_id` read from `shard`, and no upsert of it.
  bool unwritten_schedule(const std::string& shard, const std::string& job_id) const;
  void reschedule(const std::string& shard, const contract::RescheduleJob& r, std::int64_t now_ms);
  // Applies the reports collected since the last call; those whose job is in flight wait (and
  // hold b's offsets) until retry_waiting_reports() gets them through.
  void flush_reports(Batch& b, std::int64_t now_ms);
  // store: locate, then report; counts and moves timers. Returns, per report, whether it must
  // wait (its job is in flight).
  // A report and the partition of the status topic it was read from: the partition number whose
  // shards store().locate() reads first. A report keyed by its job-id, as the clients and
  // docs/consuming.md key it, lands in the partition its job's schedule did when the status topic
  // has as many partitions as the ingest topic (delayd creates both with
  // kafka.topic_partitions) and one partitioner wrote both: then one shard is read, not all.
  struct ReadReport {
    contract::StatusReport report;
    std::int32_t partition = -1;
  };
  std::vector<bool> apply_reports(const std::vector<ReadReport>& reports, std::int64_t now_ms);
  // One dead letter or waiting report of the batch is done.
  void settle_batch(std::uint64_t batch);
  void count(const contract::StatusReport& report, const storage::ReportOutcome& outcome);
  void dead_letter(Batch& b, const connectors::Record& rec, const std::string& reason,
                   DeadLetterReason why);  // b.outstanding + 1
  void send(DeadLetter letter);
  std::optional<std::string> refuse_topic(const contract::ScheduleJob& job);
  // The record read in the format of its topic.
  contract::ParsedIngest parse(const connectors::Record& rec) const;
  // A tombstone of an etf1 schedule that delayd dropped or refused, sent like a dead letter.
  void tombstone(Batch& b, const connectors::Record& rec, std::string_view why);
  config::IngestFormat format_of(std::string_view topic) const;
  // Counts and hands the wheel what one accept did. Returns true for an upsert of a job in
  // flight: it is in waiting_upserts_ now, and the caller makes its batch wait for it.
  bool accepted(const storage::NewJob& job, const storage::AcceptOutcome& o, std::uint64_t batch);

  // The store for any call but a posted accept's: every posted batch collected first, so that
  // what was read first is written first, and the connection, which takes no other call while a
  // post is owed, takes this one. Only post_accepts(), collect_one() and abandon() use
  // posting_store_ itself.
  storage::JobStore& store();

  WheelFeed& wheel_;
  storage::JobStore& posting_store_;
  connectors::KafkaProducer& producer_;
  TopicCreator* topics_;
  IngestOptions options_;
  std::vector<storage::NewJob> accepts_;    // the batch's schedules since the last cancel
  std::vector<AcceptTrace> accept_traces_;  // with a tracer: accepts_[i]'s span, begun at its read
  std::vector<ReadReport> reports_;         // the batch's reports since the last flush
  struct WaitingReport {
    ReadReport report;
    std::uint64_t batch = 0;
    std::int64_t since_ms = 0;  // steady clock
  };
  std::vector<WaitingReport> waiting_reports_;  // for jobs in flight, oldest first
  struct WaitingUpsert {
    storage::NewJob job;
    std::uint64_t batch = 0;
  };
  std::vector<WaitingUpsert> waiting_upserts_;  // for jobs in flight, oldest first
  std::int64_t next_report_retry_ = 0;          // steady clock ms
  std::mt19937_64 jitter_{std::random_device{}()};
  std::uint64_t unknown_unlogged_ = 0;  // reports for unknown jobs since the last log line
  std::chrono::steady_clock::time_point next_unknown_log_{};
  std::deque<Batch> batches_;                                   // processed or in progress, not yet committable
  std::deque<Posted> posted_;                                   // send-ahead: posted, not collected, oldest first
  bool send_ahead_ = false;                                     // options_.send_ahead and no replicas to wait for
  std::unordered_map<std::uint64_t, DeadLetter> dead_letters_;  // by tag
  std::uint64_t seq_ = 0;
  std::uint64_t batch_seq_ = 0;
  IngestCounters counters_;
};

}  // namespace delayd::broker
