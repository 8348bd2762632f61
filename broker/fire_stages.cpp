#include "broker/fire_stages.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <span>

namespace delayd::broker {

ClaimWorker::Work claim_work() {
  return [](storage::JobStore& store, std::vector<ClaimRequest>& batch) {
    std::vector<ClaimResult> results(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      ClaimRequest& r = batch[i];
      results[i].id = r.id;
      try {
        store.adopt_fence(r.shard, r.fence);
        results[i].claims = store.claim(r.shard, r.job_ids, r.now_ms, r.ahead_ms, r.due_at, r.delivered);
      } catch (...) {
        results[i].error = std::current_exception();
      }
    }
    return results;
  };
}

MarkWorker::Work mark_work() {
  return [](storage::JobStore& store, std::vector<MarkRequest>& batch) {
    // Merged per shard: one mark_ready call each (its script calls pipelined).
    std::map<std::string, std::vector<std::size_t>> by_shard;
    for (std::size_t i = 0; i < batch.size(); ++i) by_shard[batch[i].shard].push_back(i);
    std::vector<MarkResult> results(batch.size());
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
            store.mark_ready(shard, std::span<const storage::JobStore::Delivered>(jobs), now_ms);
        std::size_t at = 0;
        for (std::size_t r : requests) {
          const auto n = static_cast<std::ptrdiff_t>(batch[r].jobs.size());
          const auto from = marked.begin() + static_cast<std::ptrdiff_t>(at);
          results[r].marked.assign(std::make_move_iterator(from), std::make_move_iterator(from + n));
          at += batch[r].jobs.size();
        }
      } catch (...) {
        for (std::size_t r : requests) results[r].error = std::current_exception();
      }
    }
    return results;
  };
}

}  // namespace delayd::broker
