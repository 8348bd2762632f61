// OperationRunner: runs the console's bulk operations (POST /jobs/bulk, POST
// /dead-letters/redrive) on a thread of its own,
// with a Redis connection of its own, a batch at a time, at the rate each asks for. An operation
// lives in Redis (storage/operation_store.hpp), so any instance with the admin endpoint on can run
// it: this one takes the operation's lease (renewed every batch, kLease long), and when an
// instance dies, the next to look (every kLookEvery) resumes from the last batch it wrote.
//
// One batch: the next page of the operation's walk (storage/job_browse.hpp; the walk starts when
// the operation was created, so jobs that change after that are left out), then the action on
// each job of the page, shard by shard (JobStore::act(): applied only to a job still in the
// action's state), then one HSET of the counts and the cursor. A job is never acted on twice:
// a batch applied again after a crash finds its jobs moved on (skipped, not counted again).
//
// The operation's hash (Field names are the API's): action, filter (JSON), rate_per_s, status
// (running, stopping, stopped, done, failed), matched, done, failed, skipped (JSON {reason: n}),
// cursor, created_at, updated_at, ended_at, runner (who runs it now), last_error.
// Errors: Redis failing costs a retry with backoff (the operation waits, last_error says why);
// an operation whose stored filter no longer reads (a newer delayd wrote it) ends failed.
// Threading: its own thread; wake() and the destructor from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "config/config.hpp"
#include "storage/job_store.hpp"
#include "storage/operation_store.hpp"

namespace delayd::admin {

struct BulkRequest;     // admin/job_query.hpp
struct RedriveRequest;  // admin/dead_letter_query.hpp

// A redrive operation's action name (its hash's `action`).
inline constexpr std::string_view kRedriveAction = "redrive";

// A new operation in Redis for `request` (not a dry run), status running; its id. Any runner
// (of any instance) may take it from here.
std::string create_operation(storage::OperationStore& ops, const BulkRequest& request, std::int64_t now_ms);
// The same for a redrive (POST /dead-letters/redrive): its filter's `until` becomes now at the
// latest, so that dead letters written while it runs (a redriven record failing again) are not
// redriven by it.
std::string create_redrive_operation(storage::OperationStore& ops, const RedriveRequest& request, std::int64_t now_ms);

class OperationRunner {
 public:
  static constexpr std::chrono::seconds kLease{10};
  static constexpr std::chrono::seconds kLookEvery{2};
  // Jobs per batch, at most (fewer when the rate is lower than this per second).
  static constexpr std::size_t kBatch = 200;

  // What a batch or an ending reports, for the audit log and the metrics (admin/audit.hpp).
  using OnEnd = std::function<void(const std::string& id, const storage::OperationStore::Fields& fields)>;

  // only: run that operation alone (delayctl bulk runs its own); empty: every one.
  OperationRunner(config::Config config, std::string member, OnEnd on_end, std::string only = {});
  ~OperationRunner();
  OperationRunner(const OperationRunner&) = delete;
  OperationRunner& operator=(const OperationRunner&) = delete;

  // Look at the operations now (one was created or asked to stop).
  void wake();

 private:
  void run();
  // Runs one operation this runner holds the lease of, until it ends, is stopped, the lease is
  // lost or the runner stops. Throws on Redis errors (the caller backs off).
  void execute(storage::OperationStore& ops, storage::JobStore& jobs, const std::string& id,
               storage::OperationStore::Fields fields);
  // A redrive (action kRedriveAction): a batch is the next page of the dead-letter walk
  // (admin/dead_letter_query.hpp), published to the ingest topic and flushed; then the counts,
  // the cursor and the ingest topic's end offsets in one HSET (the crash table is beside it).
  // Throws on Redis or Kafka errors (the caller backs off).
  void execute_redrive(storage::OperationStore& ops, storage::JobStore& jobs, const std::string& id,
                       storage::OperationStore::Fields fields);
  // Items per batch: kBatch, or fewer when the rate is lower than that per second.
  static std::size_t batch_for(std::int64_t rate);
  // Before a batch: whether the operation is still this runner's to go on with (false: it is
  // gone, was stopped, which ends it here, or another instance holds its lease now).
  bool may_go_on(storage::OperationStore& ops, const std::string& id, storage::OperationStore::Fields& fields);
  // Ends the operation with this status (and error): saved, expiring, lease given up, reported.
  void finish(storage::OperationStore& ops, const std::string& id, storage::OperationStore::Fields& fields,
              const std::string& status, const std::string& error);
  // An operation's pace on this runner: `acted` items since `started`, at `rate` per second at most.
  struct Pace {
    std::int64_t rate = 1;
    std::chrono::steady_clock::time_point started;
    std::int64_t acted = 0;
  };
  // Waits until the items acted on are no longer ahead of the rate.
  void wait_for_pace(const Pace& pace);
  // Waits up to `d`, or less if woken or stopping.
  void wait_for(std::chrono::milliseconds d);

  config::Config config_;
  std::string member_;
  OnEnd on_end_;
  std::string only_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace delayd::admin
