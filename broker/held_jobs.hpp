// HeldJobs: the jobs this instance holds in memory, either waiting in the wheel or out for
// delivery, indexed by (shard, job-id) and by a dense slot number that the wheel carries as its
// payload.
//
// Invariants:
//   - a (shard, job-id) pair appears at most once (the table is how the loader and ingest avoid
//     holding a job twice when both see it). Idempotency is per shard: the same job-id published
//     to two partitions is two jobs, and both are held, each under its own shard;
//   - a slot number stays valid until erase(); erased slots are reused, so a slot must not be
//     kept beyond the job's life (the wheel's timer for a waiting job is cancelled first);
//   - phase == waiting  <=> the job has a live timer in the wheel.
// Memory: one entry costs 64 bytes in the slot table plus a 40-byte index node and bucket (the
// index stores slot numbers only and reads the shard and job-id from the slot, so the id is kept
// once), plus the id's own heap block when it is longer than 15 characters; the wheel adds about
// 28 bytes per timer (a 24-byte entry, a 4-byte generation and a pending bit: timing_wheel.hpp).
// Only jobs within the load window or in flight are held.
// Threading: owned by the scheduling loop's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/debug_assert.hpp"
#include "wheel/timing_wheel.hpp"

namespace delayd::broker {

enum class Phase : std::uint8_t {
  waiting,    // a timer in the wheel (first attempt or a retry)
  in_flight,  // claimed in Redis, record handed to Kafka, report awaited
};

struct HeldJob {
  std::string job_id;
  std::int64_t due_at = 0;  // when the timer fires: deliver_at, or a retry's time
  wheel::TimerHandle timer;
  std::uint32_t shard = 0;  // index into the scheduler's shard list
  Phase phase = Phase::waiting;
  bool orphan = false;  // its shard was revoked while it was in flight
};
static_assert(sizeof(HeldJob) <= 56, "memory per held job is part of the performance budget");

class HeldJobs {
 public:
  using Slot = std::uint32_t;

  HeldJobs() = default;
  // The index's hash and equality point back at this object: not copyable, not movable.
  HeldJobs(const HeldJobs&) = delete;
  HeldJobs& operator=(const HeldJobs&) = delete;

  // The slot of the job `job_id` of shard `shard`, if held.
  std::optional<Slot> find(std::uint32_t shard, std::string_view job_id) const {
    auto it = index_.find(Key{shard, job_id});
    if (it == index_.end()) return std::nullopt;
    return *it;
  }
  // Precondition: !find(job.shard, job.job_id).
  Slot insert(HeldJob job) {
    DELAYD_ASSERT(!find(job.shard, job.job_id), "a job is held at most once", job.shard, job.job_id, size());
    Slot s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = static_cast<Slot>(slots_.size());
      slots_.emplace_back();
    }
    slots_[s] = std::move(job);
    index_.insert(s);
    return s;
  }
  // Precondition: s is a live slot.
  HeldJob& at(Slot s) {
    DELAYD_ASSERT(live(s), "only a live slot is read", s, slots_.size());
    return *slots_[s];
  }
  const HeldJob& at(Slot s) const {
    DELAYD_ASSERT(live(s), "only a live slot is read", s, slots_.size());
    return *slots_[s];
  }
  bool live(Slot s) const { return s < slots_.size() && slots_[s].has_value(); }
  // Precondition: s is a live slot. Postcondition: !live(s), and its (shard, job-id) is not found.
  void erase(Slot s) {
    DELAYD_ASSERT(live(s), "only a live slot is erased (erasing twice would free it twice)", s, slots_.size());
    index_.erase(s);  // before the slot is emptied: the index reads its id
    slots_[s].reset();
    free_.push_back(s);
  }
  std::size_t size() const { return index_.size(); }

  // Calls f(slot, job) for every live job; f may not insert or erase.
  template <typename F>
  void for_each(F&& f) {
    for (Slot s = 0; s < slots_.size(); ++s) {
      if (slots_[s]) f(s, *slots_[s]);
    }
  }

 private:
  // A job's identity in memory: its shard (an index into the scheduler's shard list) and id.
  struct Key {
    std::uint32_t shard;
    std::string_view job_id;
    bool operator==(const Key&) const = default;
  };
  // Hash and equality over slots by their (shard, job-id), and over keys directly (for find()).
  struct ByKey {
    using is_transparent = void;
    const HeldJobs* owner;
    Key key(Slot s) const { return {owner->slots_[s]->shard, owner->slots_[s]->job_id}; }
    Key key(const Key& k) const { return k; }
    template <typename K>
    std::size_t operator()(const K& k) const {
      const Key key_of = key(k);
      // Golden-ratio mix of the shard into the id's hash: shards are small dense integers.
      return std::hash<std::string_view>{}(key_of.job_id) ^ (key_of.shard * 0x9e3779b97f4a7c15ULL);
    }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return key(a) == key(b);
    }
  };

  std::vector<std::optional<HeldJob>> slots_;
  std::vector<Slot> free_;
  std::unordered_set<Slot, ByKey, ByKey> index_{0, ByKey{this}, ByKey{this}};
};

}  // namespace delayd::broker
