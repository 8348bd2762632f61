// ChunkList and ChunkPool: the storage of a wheel slot.
//
// A slot is a FIFO of TimerEntry kept in fixed-size chunks linked head to tail. Appending writes
// into the tail chunk; opening a slot reads its chunks front to back. Both touch memory
// sequentially, which is the point: a linked list of individually allocated timer nodes costs a
// cache miss per timer on every cascade and every expiry, and at ten million timers that miss,
// not the algorithm, decides the throughput.
//
// Chunks come from a ChunkPool owned by the wheel. A chunk goes back to the pool as soon as the
// slot holding it has been read past it, and the pool hands out the most recently returned chunk
// first, so a cascade mostly writes into chunks that are still in cache. The pool allocates
// chunks in blocks and keeps them for the life of the wheel (a high-water mark, like a vector's
// capacity): in steady state no timer costs an allocation.
//
// A ChunkList does not own its chunks' memory (the pool does); it only links them. Moving a list
// transfers the chain; a list must be emptied through the pool (clear(), pop_front() or
// drain()) before it is destroyed, or its chunks are lost to the pool until the wheel dies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "wheel/timer_entry.hpp"

namespace delayd::wheel {

// 84 entries of 24 bytes plus a 16-byte header fill 2 KiB: large enough that walking a crowded
// slot is a long sequential read, small enough that the 3 x 256 mostly-sparse slots of a lightly
// loaded wheel waste little.
inline constexpr std::size_t entries_per_chunk = 84;

struct alignas(64) EntryChunk {
  EntryChunk* next = nullptr;
  std::uint32_t count = 0;  // entries written, front to back
  std::array<TimerEntry, entries_per_chunk> entries;
};

static_assert(sizeof(EntryChunk) == 2048);

class ChunkPool {
 public:
  static constexpr std::size_t chunks_per_block = 64;

  ChunkPool() = default;
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;
  ChunkPool(ChunkPool&&) noexcept = default;
  ChunkPool& operator=(ChunkPool&&) noexcept = default;

  // Post: an empty chunk (count == 0, next == nullptr). Allocates a block only when the pool is
  // exhausted; throws std::bad_alloc then.
  EntryChunk* acquire() {
    if (free_ == nullptr) grow();
    EntryChunk* chunk = free_;
    free_ = chunk->next;
    --free_count_;
    chunk->next = nullptr;
    chunk->count = 0;
    return chunk;
  }

  // Pre: chunk came from this pool and is linked into no list.
  void release(EntryChunk* chunk) noexcept {
    chunk->next = free_;
    free_ = chunk;
    ++free_count_;
  }

  [[nodiscard]] std::size_t chunks_total() const noexcept { return blocks_.size() * chunks_per_block; }
  [[nodiscard]] std::size_t chunks_free() const noexcept { return free_count_; }
  [[nodiscard]] std::size_t bytes_reserved() const noexcept { return chunks_total() * sizeof(EntryChunk); }

 private:
  void grow();

  std::vector<std::unique_ptr<EntryChunk[]>> blocks_;
  EntryChunk* free_ = nullptr;
  std::size_t free_count_ = 0;
};

class ChunkList {
 public:
  ChunkList() = default;
  ChunkList(const ChunkList&) = delete;
  ChunkList& operator=(const ChunkList&) = delete;
  ChunkList(ChunkList&& other) noexcept { *this = std::move(other); }
  ChunkList& operator=(ChunkList&& other) noexcept {
    head_ = std::exchange(other.head_, nullptr);
    tail_ = std::exchange(other.tail_, nullptr);
    read_ = std::exchange(other.read_, 0);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  ~ChunkList() = default;

  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  // Post: entry is last; size() grew by one. Throws std::bad_alloc only if the pool must grow.
  void push_back(const TimerEntry& entry, ChunkPool& pool) {
    if (tail_ == nullptr || tail_->count == entries_per_chunk) append_chunk(pool);
    tail_->entries[tail_->count++] = entry;
    ++size_;
  }

  // Pre: !empty().
  [[nodiscard]] const TimerEntry& front() const noexcept { return head_->entries[read_]; }

  // Pre: !empty(). Post: the first entry is gone; a chunk read to its end is back in the pool.
  void pop_front(ChunkPool& pool) noexcept {
    --size_;
    if (++read_ == head_->count) {
      EntryChunk* done = head_;
      head_ = done->next;
      read_ = 0;
      if (head_ == nullptr) tail_ = nullptr;
      pool.release(done);
    }
  }

  // Calls visit(entry) for every entry front to back, returning each chunk to the pool as soon
  // as it has been read, and leaves the list empty. visit may push into other lists of the same
  // pool (that is how a cascade works): a chunk is released only after its last read.
  template <typename Visit>
  void drain(ChunkPool& pool, Visit&& visit) {
    drain(pool, std::forward<Visit>(visit), [](const TimerEntry&) noexcept {});
  }

  // As drain(visit), and calls look_ahead(entry) a few entries before visit(entry) reaches it
  // (within a chunk), so that what visit will need for it can be prefetched.
  template <typename Visit, typename LookAhead>
  void drain(ChunkPool& pool, Visit&& visit, LookAhead&& look_ahead) {
    constexpr std::uint32_t distance = 8;
    EntryChunk* chunk = std::exchange(head_, nullptr);
    std::uint32_t first = std::exchange(read_, 0);
    tail_ = nullptr;
    size_ = 0;
    while (chunk != nullptr) {
      EntryChunk* next = chunk->next;
      if (next != nullptr) __builtin_prefetch(next);
      const std::uint32_t count = chunk->count;
      for (std::uint32_t i = first; i < count && i < first + distance; ++i) look_ahead(chunk->entries[i]);
      for (std::uint32_t i = first; i < count; ++i) {
        if (i + distance < count) look_ahead(chunk->entries[i + distance]);
        visit(chunk->entries[i]);
      }
      pool.release(chunk);
      chunk = next;
      first = 0;
    }
  }

  // Post: empty(); every chunk is back in the pool.
  void clear(ChunkPool& pool) noexcept {
    drain(pool, [](const TimerEntry&) noexcept {});
  }

  // Calls visit(entry) front to back without consuming (invariant checks, introspection).
  template <typename Visit>
  void for_each(Visit&& visit) const {
    std::uint32_t first = read_;
    for (const EntryChunk* chunk = head_; chunk != nullptr; chunk = chunk->next) {
      for (std::uint32_t i = first; i < chunk->count; ++i) visit(chunk->entries[i]);
      first = 0;
    }
  }

  // Entries counted by walking the chain; equals size() unless the list is corrupt.
  [[nodiscard]] std::size_t count_by_walking() const noexcept {
    std::size_t n = 0;
    for_each([&n](const TimerEntry&) noexcept { ++n; });
    return n;
  }

 private:
  void append_chunk(ChunkPool& pool) {
    EntryChunk* chunk = pool.acquire();
    if (tail_ == nullptr) {
      head_ = chunk;
    } else {
      tail_->next = chunk;
    }
    tail_ = chunk;
  }

  EntryChunk* head_ = nullptr;
  EntryChunk* tail_ = nullptr;
  std::uint32_t read_ = 0;  // entries of head_ already consumed by pop_front()
  std::size_t size_ = 0;
};

}  // namespace delayd::wheel
