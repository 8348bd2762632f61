#include "broker/mark_worker.hpp"

#include <map>
#include <utility>

namespace delayd::broker {

MarkWorker::MarkWorker(storage::JobStore& store, const DurationHistogram& latency)
    : store_(store), latency_(latency), thread_([this] { run(); }) {}

MarkWorker::~MarkWorker() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MarkWorker::submit(Request request) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(request));
    ++outstanding_;
    ++unfinished_;
  }
  wake_.notify_one();
}

std::vector<MarkWorker::Result> MarkWorker::take_done() {
  std::lock_guard lock(mutex_);
  std::vector<Result> out;
  out.swap(done_);
  outstanding_ -= out.size();
  return out;
}

std::size_t MarkWorker::outstanding() const {
  std::lock_guard lock(mutex_);
  return outstanding_;
}

bool MarkWorker::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return unfinished_ == 0; });
}

DurationHistogram MarkWorker::latency() const {
  std::lock_guard lock(mutex_);
  return latency_copy_;
}

void MarkWorker::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left in hand
    std::vector<Request> batch;
    batch.swap(queue_);
    lock.unlock();
    std::vector<Result> results = mark(batch);
    lock.lock();
    for (auto& r : results) done_.push_back(std::move(r));
    unfinished_ -= batch.size();
    latency_copy_ = latency_;
    idle_.notify_all();
    if (stop_) return;
  }
}

std::vector<MarkWorker::Result> MarkWorker::mark(std::vector<Request>& batch) {
  // Merged per shard: one mark_ready call each (its script calls pipelined).
  std::map<std::string, std::vector<std::size_t>> by_shard;
  for (std::size_t i = 0; i < batch.size(); ++i) by_shard[batch[i].shard].push_back(i);
  std::vector<Result> results(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) results[i].id = batch[i].id;
  for (const auto& [shard, requests] : by_shard) {
    std::vector<storage::JobStore::Delivered> jobs;
    std::int64_t now_ms = 0;
    for (std::size_t r : requests) {
      jobs.insert(jobs.end(), batch[r].jobs.begin(), batch[r].jobs.end());
      now_ms = std::max(now_ms, batch[r].now_ms);
    }
    try {
      std::vector<storage::Transition> marked =
          store_.mark_ready(shard, std::span<const storage::JobStore::Delivered>(jobs), now_ms);
      std::size_t at = 0;
      for (std::size_t r : requests) {
        const std::size_t n = batch[r].jobs.size();
        results[r].marked.assign(std::make_move_iterator(marked.begin() + static_cast<std::ptrdiff_t>(at)),
                                 std::make_move_iterator(marked.begin() + static_cast<std::ptrdiff_t>(at + n)));
        at += n;
      }
    } catch (...) {
      for (std::size_t r : requests) results[r].error = std::current_exception();
    }
  }
  return results;
}

}  // namespace delayd::broker
