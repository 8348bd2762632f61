// MarkWorker: the settle stage. A thread with a Redis connection of its own that writes "ready"
// for records Kafka acknowledged (JobStore::mark_ready), so that marks are in flight while the
// loop's thread claims and produces, and neither waits for the other's reply.
//
//   submit()     the loop hands over one shard's delivered jobs; never blocks
//   the thread   takes everything submitted so far, merges it per shard (one mark_ready call per
//                shard: script calls of JobStore::kJobsPerCall jobs, pipelined), and posts one
//                Result per request, in submission order
//   take_done()  the loop collects the results (no wait), and applies them: follow-ups to the
//                wheel, counters, the in-flight entries dropped (FirePath::settle())
// A failed round trip (Redis down, an error reply) fails every request of that turn with the
// exception; the loop re-queues their reports and raises it as its own (an outage, retried).
// Marks are idempotent (storage/job_store.hpp: a mark repeated finds the job ready), so a
// request applied by Redis whose reply was lost is simply sent again.
//
// Crash points: as mark in job_store.hpp's table. A crash while a request is queued or in flight
// leaves the job claimed and not marked: delivered again after the restart (at-least-once), as a
// crash between produce and mark always did.
//
// Threading: submit(), take_done(), outstanding(), wait_idle() and latency() from the loop's
// thread; the worker thread owns the store. The destructor stops and joins the thread (after the
// request in hand, if any).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "broker/snapshot.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

class MarkWorker {
 public:
  struct Request {
    std::uint64_t id = 0;  // the caller's, handed back in the Result
    std::string shard;
    std::vector<storage::JobStore::Delivered> jobs;
    std::int64_t now_ms = 0;
  };
  struct Result {
    std::uint64_t id = 0;
    std::vector<storage::Transition> marked;  // one per job of the request, in its order (no error)
    std::exception_ptr error;                 // set: nothing of the request is known to be written
  };

  // `store` runs over a Redis client used by nothing else; `latency` is that client's histogram
  // (TimedRedisClient), written only by the worker thread. Both must outlive the worker.
  MarkWorker(storage::JobStore& store, const DurationHistogram& latency);
  ~MarkWorker();
  MarkWorker(const MarkWorker&) = delete;
  MarkWorker& operator=(const MarkWorker&) = delete;

  void submit(Request request);
  std::vector<Result> take_done();
  // Requests submitted whose results are not taken yet.
  std::size_t outstanding() const;
  // Waits until every submitted request has a result (or `timeout` passes); true if so.
  bool wait_idle(std::chrono::milliseconds timeout);
  // A copy of the worker's Redis round-trip histogram, as of its last finished turn.
  DurationHistogram latency() const;

 private:
  void run();
  // Marks `batch` (one turn's requests) and returns their results.
  std::vector<Result> mark(std::vector<Request>& batch);

  storage::JobStore& store_;
  const DurationHistogram& latency_;  // written by the worker thread only
  mutable std::mutex mutex_;
  std::condition_variable wake_;    // the worker waits for requests
  std::condition_variable idle_;    // wait_idle() waits for results
  std::vector<Request> queue_;      // guarded by mutex_
  std::vector<Result> done_;        // guarded by mutex_
  std::size_t outstanding_ = 0;     // guarded by mutex_: submitted, result not taken
  std::size_t unfinished_ = 0;      // guarded by mutex_: submitted, no result yet
  DurationHistogram latency_copy_;  // guarded by mutex_
  bool stop_ = false;               // guarded by mutex_
  std::thread thread_;
};

}  // namespace delayd::broker
