// StoreWorker: a stage of the fire path on a thread of its own, with a Redis connection (and
// JobStore) of its own, so that its round trips are in flight while the loop's thread works.
//
//   submit()     the loop hands over a request; never blocks
//   the thread   takes the requests submitted so far, at most `per_turn` of them, and runs them
//                together (`work`: one call for the whole turn, so it may merge or pipeline
//                them), then posts one Result per request, in submission order, and calls
//                `on_done` (the loop wakes). A small per_turn hands each result back as soon as
//                it is there, so the loop refills the queue while the next one runs.
//                With a `gather` time, a turn whose oldest request is younger than `gather`
//                waits until it is that old, then takes every request submitted meanwhile (the
//                requests of one gather); a backlog older than that is taken per_turn at once, as
//                without. So at modest rates the turns are fewer and larger, and a request waits
//                at most `gather` longer for its turn. wait_idle() and the destructor cut a wait
//                short.
//   take_done()  the loop collects the results (no wait) and applies them on its own thread
// Two stages use it (fire_stages.hpp): claims (ClaimWorker, issued ahead while earlier ones are
// in flight) and marks (MarkWorker, written while the loop claims and produces). Everything a
// result changes (the wheel, the held records, the counters) is changed by the loop's thread;
// the worker touches only its store.
//
// Errors: `work` sets Result::error for what failed (it must not throw); the loop decides (an
// outage: retried; a fenced shard: given up).
//
// Threading: submit(), take_done(), outstanding(), wait_idle() and latency() from the loop's
// thread; the worker thread owns the store. The destructor stops and joins the thread (after the
// turn in hand, if any).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/thread_name.hpp"
#include "broker/snapshot.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

template <typename Request, typename Result>
class StoreWorker {
 public:
  using Clock = std::chrono::steady_clock;
  // One turn: results[i] answers requests[i] (results.size() == requests.size()).
  using Work = std::function<std::vector<Result>(storage::JobStore&, std::vector<Request>&)>;

  // `store` runs over a Redis client used by nothing else; `latency` is that client's histogram
  // (TimedRedisClient), written only by this thread. Both must outlive the worker. `on_done` is
  // called on the worker thread after each turn (may be empty). `name` is the thread's
  // (base/thread_name.hpp). `gather` (>= 0; 0: none) as above.
  StoreWorker(std::string_view name, storage::JobStore& store, const DurationHistogram& latency, Work work,
              std::function<void()> on_done, std::size_t per_turn = SIZE_MAX,
              std::chrono::milliseconds gather = std::chrono::milliseconds(0))
      : name_(name),
        store_(store),
        latency_(latency),
        work_(std::move(work)),
        on_done_(std::move(on_done)),
        per_turn_(std::max<std::size_t>(per_turn, 1)),
        gather_(std::max(gather, std::chrono::milliseconds(0))),
        thread_([this] { run(); }) {}
  ~StoreWorker() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  StoreWorker(const StoreWorker&) = delete;
  StoreWorker& operator=(const StoreWorker&) = delete;

  void submit(Request request) {
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) first_at_ = Clock::now();
      queue_.push_back(std::move(request));
      ++outstanding_;
      ++unfinished_;
    }
    wake_.notify_one();
  }
  std::vector<Result> take_done() {
    std::lock_guard lock(mutex_);
    std::vector<Result> out;
    out.swap(done_);
    outstanding_ -= out.size();
    return out;
  }
  // Requests submitted whose results are not taken yet.
  std::size_t outstanding() const {
    std::lock_guard lock(mutex_);
    return outstanding_;
  }
  // Waits until every submitted request has a result (or `timeout` passes); true if so. The
  // requests run at once: a gather under way ends, and none starts until this returns.
  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ++hurry_;
    wake_.notify_all();
    const bool idle = idle_.wait_for(lock, timeout, [&] { return unfinished_ == 0; });
    --hurry_;
    return idle;
  }
  // A copy of the worker's Redis round-trip histogram, as of its last finished turn.
  DurationHistogram latency() const {
    std::lock_guard lock(mutex_);
    return latency_copy_;
  }

 private:
  void run() {
    base::name_this_thread(name_);
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left in hand
      // Gathering: only when the oldest request is younger than gather_ (an idle worker);
      // what arrives meanwhile joins the turn, whatever per_turn says.
      bool gathered = false;
      if (gather_.count() > 0 && !stop_ && hurry_ == 0) {
        const Clock::time_point until = first_at_ + gather_;
        if (Clock::now() < until) {
          wake_.wait_until(lock, until, [&] { return stop_ || hurry_ > 0; });
          gathered = true;
        }
      }
      std::vector<Request> batch;
      if (gathered || queue_.size() <= per_turn_) {
        batch.swap(queue_);
      } else {
        const auto cut = queue_.begin() + static_cast<std::ptrdiff_t>(per_turn_);
        batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(cut));
        queue_.erase(queue_.begin(), cut);
      }
      lock.unlock();
      std::vector<Result> results = work_(store_, batch);
      lock.lock();
      for (auto& r : results) done_.push_back(std::move(r));
      unfinished_ -= batch.size();
      latency_copy_ = latency_;
      idle_.notify_all();
      if (on_done_) {
        lock.unlock();
        on_done_();
        lock.lock();
      }
      if (stop_) return;
    }
  }

  std::string name_;  // the thread's
  storage::JobStore& store_;
  const DurationHistogram& latency_;  // written by the worker thread only (its client's)
  Work work_;
  std::function<void()> on_done_;
  std::size_t per_turn_;              // requests run together at most (unless gathered)
  std::chrono::milliseconds gather_;  // how old an idle worker lets its first request grow; 0: none
  mutable std::mutex mutex_;
  std::condition_variable wake_;    // the worker waits for requests
  std::condition_variable idle_;    // wait_idle() waits for results
  std::vector<Request> queue_;      // guarded by mutex_
  std::vector<Result> done_;        // guarded by mutex_
  std::size_t outstanding_ = 0;     // guarded by mutex_: submitted, result not taken
  std::size_t unfinished_ = 0;      // guarded by mutex_: submitted, no result yet
  DurationHistogram latency_copy_;  // guarded by mutex_
  bool stop_ = false;               // guarded by mutex_
  int hurry_ = 0;                   // guarded by mutex_: wait_idle() calls under way (no gathering)
  Clock::time_point first_at_;      // guarded by mutex_: when the oldest queued request was submitted
  std::thread thread_;              // last: started once everything above exists
};

}  // namespace delayd::broker
