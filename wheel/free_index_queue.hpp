// FreeIndexQueue: the free timer indices, oldest first, each with its last generation.
//
// A ring buffer over a vector whose capacity is a power of two; it grows by doubling when full
// and never shrinks (a high-water mark, like the rest of the wheel's memory), so in steady state
// pushing and popping never allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace delayd::wheel {

struct FreeIndex {
  std::uint32_t index;
  std::uint32_t generation;  // the generation its last timer had
};

class FreeIndexQueue {
 public:
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return ring_.size(); }

  // Post: f is last. Throws std::bad_alloc only when growing.
  void push_back(FreeIndex f) {
    if (size_ == ring_.size()) grow();
    ring_[(head_ + size_) & (ring_.size() - 1)] = f;
    ++size_;
  }

  // Pre: !empty(). Post: the oldest entry is removed and returned.
  FreeIndex pop_front() noexcept {
    const FreeIndex f = ring_[head_];
    head_ = (head_ + 1) & (ring_.size() - 1);
    --size_;
    return f;
  }

  // Pre: i < size(). The entry that pop_front() returns after i more pops.
  [[nodiscard]] const FreeIndex& at(std::size_t i) const noexcept { return ring_[(head_ + i) & (ring_.size() - 1)]; }

  // Calls visit(f) for every entry, oldest first (invariant checks).
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (std::size_t i = 0; i < size_; ++i) visit(ring_[(head_ + i) & (ring_.size() - 1)]);
  }

 private:
  void grow() {
    std::vector<FreeIndex> bigger(ring_.empty() ? 64 : 2 * ring_.size());
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
    ring_.swap(bigger);
    head_ = 0;
  }

  std::vector<FreeIndex> ring_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace delayd::wheel
