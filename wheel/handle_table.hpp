// HandleTable: which timer indices are in use, which are still pending, and which handles are
// current.
//
// Per index the table keeps a 32-bit generation and one pending bit; free indices wait in a
// queue together with their last generation. The pieces are split by how often they are used:
//
//   pending bits   read for every entry the wheel cascades or fires. One bit per index keeps the
//                  whole set cache-resident (10 M timers: 1.25 MB), so checking whether a timer
//                  was cancelled costs no trip to main memory.
//   generations    read only by cancel(), to tell a current handle from a stale one; written when
//                  an index is handed out again. At ten million timers this table is far larger
//                  than the caches, and that write was the one cache miss left on the path from
//                  fire to reschedule: measured, it cost more than everything else together.
//   free queue     so the write is made cheap in advance: an index is reused only after
//                  `reuse_delay` younger ones have been freed, and each acquire() prefetches, for
//                  writing, the generation of the index it will hand out `reuse_delay` calls
//                  later. By then the line is in cache. (Prefetching on release instead would
//                  tax a wheel that only fires.) The queue also remembers the old generation, so the
//                  write needs no read. The price is `reuse_delay` indices beyond the peak
//                  number of live timers; the bonus is that a stale handle's index is not reused
//                  at once.
//
// Lifetime of an index:  acquire() -> pending -> (fire | cancel) -> [entry still in a slot]
//                        -> release() -> free -> acquire() with generation + 1.
// A cancelled timer's index is not freed by cancel(): its entry still sits in a wheel slot and
// names the index, so the index may only be reused once the wheel has dropped that entry.
//
// Invariants:
//   - pending(i) implies i is not in the free queue;
//   - every index in the free queue carries the generation generations_[i];
//   - generations_[i] != 0 for every index ever handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "wheel/free_index_queue.hpp"
#include "wheel/timer_handle.hpp"

namespace delayd::wheel {

class HandleTable {
 public:
  // Freed indices younger than this many are not reused yet (see the free queue above). 64
  // schedules take microseconds, well over a memory latency, and 64 cache lines fit in L1.
  static constexpr std::size_t reuse_delay = 64;

  // Post: the returned handle is valid and pending; its generation differs from every earlier
  // handle with the same index. Amortised O(1); allocates only to grow past the high-water mark.
  // Throws std::length_error when all 2^32 indices are in use.
  TimerHandle acquire() {
    if (free_.size() > reuse_delay) {
      const FreeIndex slot = free_.pop_front();
      // Start the lines of the index handed out reuse_delay acquisitions from now on their way.
      const std::uint32_t ahead = free_.at(reuse_delay - 1).index;
      __builtin_prefetch(&generations_[ahead], 1);
      __builtin_prefetch(&pending_bits_[ahead >> 6], 1);
      std::uint32_t generation = slot.generation + 1;
      if (generation == 0) generation = 1;  // 0 marks the invalid handle
      generations_[slot.index] = generation;
      set_pending(slot.index);
      return TimerHandle{slot.index, generation};
    }
    return acquire_fresh();
  }

  // True iff h names a pending timer; then it is pending no longer. Its index stays in use until
  // release(). A stale, foreign or default handle returns false and changes nothing.
  bool cancel(TimerHandle h) noexcept {
    if (h.index >= generations_.size() || generations_[h.index] != h.generation) return false;
    if (!pending(h.index)) return false;
    clear_pending(h.index);
    return true;
  }

  // Pre: index < capacity().
  [[nodiscard]] bool pending(std::uint32_t index) const noexcept {
    return (pending_bits_[index >> 6] >> (index & 63)) & 1U;
  }

  // Starts the pending bit of index on its way into cache, ahead of pending(index).
  void prefetch_pending(std::uint32_t index) const noexcept { __builtin_prefetch(&pending_bits_[index >> 6]); }

  // The pending timer at index fires. Pre: pending(index), generation is the index's current one.
  // Post: the index is free for reuse.
  void fire(std::uint32_t index, std::uint32_t generation) {
    clear_pending(index);
    release(index, generation);
  }

  // The wheel dropped the entry of a cancelled timer. Pre: !pending(index), generation current,
  // index not already free. Post: the index is free for reuse.
  void release(std::uint32_t index, std::uint32_t generation) { free_.push_back(FreeIndex{index, generation}); }

  // Indices ever handed out (in use or free).
  [[nodiscard]] std::size_t capacity() const noexcept { return generations_.size(); }
  [[nodiscard]] std::size_t free_count() const noexcept { return free_.size(); }
  [[nodiscard]] std::uint32_t generation(std::uint32_t index) const noexcept { return generations_[index]; }

  // Bytes held by the table (introspection).
  [[nodiscard]] std::size_t bytes_reserved() const noexcept {
    return generations_.capacity() * sizeof(std::uint32_t) + pending_bits_.capacity() * sizeof(std::uint64_t) +
           free_.capacity() * sizeof(FreeIndex);
  }

  // Calls visit(index, generation) for each free index (invariant checks).
  template <typename Visit>
  void for_each_free(Visit&& visit) const {
    free_.for_each([&visit](const FreeIndex& f) { visit(f.index, f.generation); });
  }

  // Number of pending indices, by counting bits (invariant checks; O(capacity)).
  [[nodiscard]] std::size_t count_pending() const noexcept;

 private:
  TimerHandle acquire_fresh();

  void set_pending(std::uint32_t index) noexcept { pending_bits_[index >> 6] |= std::uint64_t{1} << (index & 63); }
  void clear_pending(std::uint32_t index) noexcept { pending_bits_[index >> 6] &= ~(std::uint64_t{1} << (index & 63)); }

  std::vector<std::uint32_t> generations_;
  std::vector<std::uint64_t> pending_bits_;
  FreeIndexQueue free_;
};

}  // namespace delayd::wheel
