// StoreJobBackend: the admin endpoint's access to jobs, through its own Redis client and Kafka
// producer (never the scheduling loop's): GET /jobs/{id} reads the job's record, DELETE /jobs/{id}
// cancels as `delayctl cancel` does (a cancel record on the ingest topic, so the instance owning
// the job drops it from its wheel, then Redis watched for the outcome), and the pending counts
// per shard come from JobStore::stats(); the overview from stats() and due_counts() (two round
// trips, plus one each for the list of shards). The dead letters are read from their topic by a
// TopicReader of its own (no consumer group).
//
// Verdicts of cancel, as delayctl's: 404 no such job; 409 {"cancelled": false, "state"} when the
// job is no longer waiting (delivered, failed, cancelled already, in flight); 200 {"cancelled":
// true} once Redis says cancelled; 202 {"cancelled": false, "state": "delay"} when the cancel is
// published but no instance acted on it within cancel_wait.
//
// Connects lazily, at the first call, and drops its Redis connection when a call fails, so the
// next call connects again: Redis being down at start-up or later costs 503s, nothing more.
// Threading: one thread at a time (the admin's worker thread); calls block.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "admin/admin_server.hpp"
#include "admin/operation_runner.hpp"
#include "config/config.hpp"
#include "connectors/kafka_producer.hpp"
#include "connectors/topic_reader.hpp"
#include "storage/job_store.hpp"

namespace delayd::admin {

class StoreJobBackend final : public JobBackend {
 public:
  StoreJobBackend(config::Config config, std::chrono::milliseconds cancel_wait);
  ~StoreJobBackend() override;

  // 200 with the job as `delayctl get` prints it, or 404.
  JobAnswer get(const std::string& job_id) override;
  // See the verdicts above.
  JobAnswer cancel(const std::string& job_id) override;
  // 200 with a page of the walk (admin/job_query.hpp's page_json()).
  JobAnswer list(const ListRequest& request, std::int64_t now_ms) override;
  // Run-now and reschedule, straight in Redis (JobStore::reschedule_anywhere; the owner is woken
  // through the shard's wake list): 200 {"rescheduled": true, "state": "delay", "deliver_at"};
  // 404 no such job; 409 {"rescheduled": false, "state"} when it is not waiting, or in flight.
  JobAnswer reschedule(const std::string& job_id, std::int64_t deliver_at, std::int64_t now_ms) override;
  // A failed job delivered again (JobStore::retry_anywhere): 200 {"retried": true, "state":
  // "delay", "source": "payload"}; 409 {"retried": false, "state": "failed"} when its payload is
  // gone (its dead letter is the way back); 409 when it is not failed; 404 no such job.
  JobAnswer retry(const std::string& job_id, std::int64_t now_ms) override;
  // A dry run: 200 {"dry_run": true, "matched": N, "complete": bool} (complete false when the
  // count stopped at kDryRunFor); otherwise 202 {"operation": id} and the runner is woken.
  JobAnswer bulk(const BulkRequest& request, std::int64_t now_ms) override;
  // 200 with the operation (its fields, filter and skipped as JSON) or, for "", the newest
  // operations; 404 for an unknown id.
  JobAnswer operation(const std::string& id) override;
  // 202 {"status": "stopping"} (the runner stops it after its batch); 409 when it has ended; 404.
  JobAnswer stop_operation(const std::string& id) override;
  // 200 with a page of the dead-letter topic's walk (admin/dead_letter_query.hpp).
  JobAnswer dead_letters(const DeadLetterListRequest& request) override;
  // A dry run: 200 {"dry_run": true, "matched": N, "would_skip": {reason: n}, "complete": bool}
  // (complete false when the count stopped at kDryRunFor); otherwise 202 {"operation": id}.
  JobAnswer redrive(const RedriveRequest& request, std::int64_t now_ms) override;
  void set_audit_sink(AuditSink sink) override;
  // How long a dry run counts, at most.
  static constexpr std::chrono::seconds kDryRunFor{10};
  // JobStore::stats().pending_by_shard.
  storage::StoreStats store_stats() override;
  // Pending per business ("delay" counters) and shard, next due, the due timeline.
  Overview overview(std::int64_t now_ms) override;

 private:
  // The audit line of an operation that ended (the runner's thread).
  void audit_end(const std::string& id, const storage::OperationStore::Fields& fields);
  // The store, connected now if it is not; the Redis connection is dropped if `f` throws.
  template <class F>
  auto with_store(F f);
  std::string state_of(const std::string& job_id);  // "missing" when there is no such job
  void publish_cancel(const std::string& job_id);
  // The dead-letter topic's reader, made now if there is none; dropped if `f` throws.
  template <class F>
  auto with_reader(F f);

  config::Config config_;
  std::chrono::milliseconds cancel_wait_;
  std::unique_ptr<redis::RedisClient> redis_;
  std::unique_ptr<storage::JobStore> store_;
  std::unique_ptr<connectors::KafkaProducer> producer_;
  std::optional<connectors::DeliveryReport> report_;
  std::unique_ptr<connectors::TopicReader> reader_;
  std::mutex sink_mutex_;  // guards sink_ (the runner's thread reads it)
  AuditSink sink_;
  std::unique_ptr<OperationRunner> runner_;  // runs the bulk operations, on a thread of its own
};

}  // namespace delayd::admin
