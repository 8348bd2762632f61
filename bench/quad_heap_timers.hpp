// Baseline 2: an indexed 4-ary min-heap with true O(log n) cancel.
//
// A position table maps each timer index to its node, so cancel() removes the node at once
// (last node into the hole, then sift). Four children per node halve the depth of a binary heap
// and put siblings next to each other in memory, the usual remedy for a heap's cache misses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "bench/heap_node.hpp"
#include "wheel/handle_table.hpp"
#include "wheel/timing_wheel.hpp"

namespace delayd::bench {

class QuadHeapTimers {
 public:
  explicit QuadHeapTimers(std::uint64_t start) : now_(start) {}

  wheel::TimerHandle schedule(std::uint64_t deadline, std::uint64_t payload) {
    const wheel::TimerHandle h = handles_.acquire();
    if (h.index >= position_.size()) position_.resize(h.index + 1);
    heap_.push_back(HeapNode{deadline, seq_++, payload, h.index, h.generation});
    sift_up(heap_.size() - 1);
    return h;
  }

  bool cancel(wheel::TimerHandle h) {
    if (!handles_.cancel(h)) return false;
    const std::size_t at = position_[h.index];
    handles_.release(h.index, h.generation);
    remove_at(at);
    return true;
  }

  std::size_t advance(std::uint64_t now, std::size_t limit, std::vector<wheel::Expired>& out) {
    if (now > now_) now_ = now;
    std::size_t released = 0;
    while (released < limit && !heap_.empty() && heap_.front().deadline <= now_) {
      const HeapNode n = heap_.front();
      remove_at(0);
      handles_.fire(n.index, n.generation);
      out.push_back(n.expired());
      ++released;
    }
    return released;
  }

  std::optional<std::uint64_t> next_expiry() const {
    if (heap_.empty()) return std::nullopt;
    return heap_.front().deadline;
  }

  [[nodiscard]] std::size_t size() const { return heap_.size(); }

 private:
  void place(std::size_t at, const HeapNode& n) {
    heap_[at] = n;
    position_[n.index] = static_cast<std::uint32_t>(at);
  }

  void sift_up(std::size_t at) {
    const HeapNode n = heap_[at];
    while (at > 0) {
      const std::size_t parent = (at - 1) / 4;
      if (!fires_before(n, heap_[parent])) break;
      place(at, heap_[parent]);
      at = parent;
    }
    place(at, n);
  }

  void sift_down(std::size_t at) {
    const HeapNode n = heap_[at];
    const std::size_t size = heap_.size();
    for (;;) {
      const std::size_t first = 4 * at + 1;
      if (first >= size) break;
      std::size_t best = first;
      const std::size_t end = first + 4 < size ? first + 4 : size;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (fires_before(heap_[c], heap_[best])) best = c;
      }
      if (!fires_before(heap_[best], n)) break;
      place(at, heap_[best]);
      at = best;
    }
    place(at, n);
  }

  void remove_at(std::size_t at) {
    const std::size_t last = heap_.size() - 1;
    if (at != last) {
      const bool up = fires_before(heap_[last], heap_[at]);
      heap_[at] = heap_[last];
      heap_.pop_back();
      if (up) {
        sift_up(at);
      } else {
        sift_down(at);
      }
    } else {
      heap_.pop_back();
    }
  }

  std::vector<HeapNode> heap_;
  std::vector<std::uint32_t> position_;  // timer index -> node
  wheel::HandleTable handles_;
  std::uint64_t seq_ = 0;
  std::uint64_t now_;
};

}  // namespace delayd::bench
