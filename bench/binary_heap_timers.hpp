// Baseline 1: a binary-heap timer queue, std::priority_queue with lazy cancel.
//
// The textbook answer. cancel() only clears the timer's pending bit (the same HandleTable the
// wheel uses); the node stays in the heap until it reaches the top and is dropped there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

#include "bench/heap_node.hpp"
#include "wheel/handle_table.hpp"
#include "wheel/timing_wheel.hpp"

namespace delayd::bench {

class BinaryHeapTimers {
 public:
  explicit BinaryHeapTimers(std::uint64_t start) : now_(start) {}

  wheel::TimerHandle schedule(std::uint64_t deadline, std::uint64_t payload) {
    const wheel::TimerHandle h = handles_.acquire();
    heap_.push(HeapNode{deadline, seq_++, payload, h.index, h.generation});
    ++pending_;
    return h;
  }

  bool cancel(wheel::TimerHandle h) {
    if (!handles_.cancel(h)) return false;
    --pending_;
    return true;
  }

  std::size_t advance(std::uint64_t now, std::size_t limit, std::vector<wheel::Expired>& out) {
    if (now > now_) now_ = now;
    std::size_t released = 0;
    while (released < limit && !heap_.empty() && heap_.top().deadline <= now_) {
      const HeapNode n = heap_.top();
      heap_.pop();
      if (handles_.pending(n.index)) {
        handles_.fire(n.index, n.generation);
        out.push_back(n.expired());
        ++released;
      } else {
        handles_.release(n.index, n.generation);
      }
    }
    pending_ -= released;
    return released;
  }

  std::optional<std::uint64_t> next_expiry() {
    while (!heap_.empty() && !handles_.pending(heap_.top().index)) {
      handles_.release(heap_.top().index, heap_.top().generation);
      heap_.pop();
    }
    if (heap_.empty()) return std::nullopt;
    return heap_.top().deadline;
  }

  [[nodiscard]] std::size_t size() const { return pending_; }

 private:
  struct FiresLater {  // std::priority_queue keeps the greatest on top
    bool operator()(const HeapNode& a, const HeapNode& b) const { return fires_before(b, a); }
  };

  std::priority_queue<HeapNode, std::vector<HeapNode>, FiresLater> heap_;
  wheel::HandleTable handles_;
  std::uint64_t seq_ = 0;
  std::uint64_t now_;
  std::size_t pending_ = 0;
};

}  // namespace delayd::bench
