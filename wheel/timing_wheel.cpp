#include "wheel/timing_wheel.hpp"

#include <bit>
#include <limits>
#include <stdexcept>
#include <string>

#include "base/debug_assert.hpp"

namespace delayd::wheel {

namespace {

constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();

WheelConfig validated(WheelConfig cfg) {
  if (cfg.tick == 0) throw std::invalid_argument("delayd::wheel: tick must be >= 1");
  if (cfg.slot_bits < 1 || cfg.slot_bits > 12) {
    throw std::invalid_argument("delayd::wheel: slot_bits must be in 1..12");
  }
  return cfg;
}

}  // namespace

TimingWheel::TimingWheel(WheelConfig cfg, std::uint64_t start)
    : cfg_(validated(cfg)),
      tick_(cfg_.tick),
      bits_(cfg_.slot_bits),
      slot_mask_((std::uint64_t{1} << cfg_.slot_bits) - 1),
      span_(std::uint64_t{1} << (levels * cfg_.slot_bits)),
      now_(start),
      now_tick_(start / cfg_.tick),
      cursor_(now_tick_) {
  const std::size_t slots = std::size_t{1} << bits_;
  for (Level& level : levels_) {
    level.occupied = OccupancyBitmap(slots);
    level.slots.resize(slots);
    level.min_tick.assign(slots, max_u64);
  }
}

std::uint64_t TimingWheel::to_caller(std::uint64_t tick) const noexcept {
  return tick > max_u64 / tick_ ? max_u64 : tick * tick_;
}

unsigned TimingWheel::level_for(std::uint64_t tick) const noexcept {
  // The highest differing digit; deadlines in the next top-level block (xor >= span) stay at the
  // top, where their slot is read as one rotation later.
  const std::uint64_t differing = tick ^ cursor_;
  if ((differing >> bits_) == 0) return 0;
  if ((differing >> (2 * bits_)) == 0) return 1;
  return 2;
}

void TimingWheel::file(const TimerEntry& entry, std::uint64_t tick) {
  DELAYD_ASSERT(tick > cursor_ && tick - cursor_ < span_, "only a deadline inside the levels' window is filed", tick,
                cursor_, span_);
  const unsigned level = level_for(tick);
  const auto slot = static_cast<std::size_t>((tick >> (level * bits_)) & slot_mask_);
  Level& lv = levels_[level];
  lv.slots[slot].push_back(entry, pool_);
  lv.occupied.set(slot);
  ++lv.entries;
  if (tick < lv.min_tick[slot]) lv.min_tick[slot] = tick;
}

ScheduleResult TimingWheel::schedule(std::uint64_t deadline, std::uint64_t payload) {
  const std::uint64_t tick = tick_of(deadline);
  // Three cases, in this order: already reached by the cursor (due now); inside the levels'
  // window; or passed by now() but beyond the window of a cursor left behind by a cut-short
  // advance(). Only a future deadline beyond the window is refused.
  const bool due = tick <= cursor_;
  const bool in_window = !due && tick - cursor_ < span_;
  if (!due && !in_window && deadline > now_) return ScheduleResult{ScheduleStatus::beyond_range, TimerHandle{}};

  const TimerHandle handle = handles_.acquire();
  const TimerEntry entry{deadline, payload, handle.index, handle.generation};
  if (in_window) {
    file(entry, tick);
  } else {
    due_.push_back(entry, pool_);
  }
  ++pending_;
  return ScheduleResult{ScheduleStatus::scheduled, handle};
}

std::optional<TimingWheel::SlotRef> TimingWheel::earliest_slot() const noexcept {
  // The lowest non-empty level holds the earliest slot (see "Levels" in the header). The search
  // starts just after the cursor's own slot: below the top level that slot is always empty, and
  // at the top level it can only hold next-rotation deadlines, the latest of all.
  for (unsigned level = 0; level < levels; ++level) {
    const Level& lv = levels_[level];
    if (!lv.occupied.any()) continue;
    const unsigned shift = level * bits_;
    const auto here = static_cast<std::size_t>((cursor_ >> shift) & slot_mask_);
    const std::size_t slot = lv.occupied.find_from((here + 1) & slot_mask_);
    const std::uint64_t level_span_mask = (std::uint64_t{1} << (shift + bits_)) - 1;
    std::uint64_t start = (cursor_ & ~level_span_mask) + (static_cast<std::uint64_t>(slot) << shift);
    if (start <= cursor_) start += level_span_mask + 1;  // next rotation (top level only)
    return SlotRef{level, slot, start};
  }
  return std::nullopt;
}

std::optional<std::uint64_t> TimingWheel::next_expiry() const noexcept {
  if (pending_ == 0) return std::nullopt;
  if (!due_.empty()) return to_caller(cursor_);
  const std::optional<SlotRef> next = earliest_slot();
  DELAYD_ASSERT(next.has_value(), "a pending timer is on the due list or in an occupied slot", pending_, cursor_,
                levels_[0].entries, levels_[1].entries, levels_[2].entries);
  if (!next) return std::nullopt;  // the safe answer in a release build if the invariant broke
  const std::uint64_t tick = next->level == 0 ? next->start : levels_[next->level].min_tick[next->slot];
  return to_caller(tick);
}

void TimingWheel::open_slot(const SlotRef& ref) {
  Level& lv = levels_[ref.level];
  ChunkList& slot = lv.slots[ref.slot];
  lv.entries -= slot.size();
  lv.occupied.clear(ref.slot);
  lv.min_tick[ref.slot] = max_u64;
  cursor_ = ref.start;

  if (ref.level == 0) {
    // A level-0 slot is a single tick, now reached: the whole chain becomes the due list.
    // The due list is empty here (advance() opens a slot only after draining it).
    DELAYD_ASSERT(due_.empty(), "a level-0 slot is opened only once the due list is drained", due_.size(), cursor_);
    due_ = std::move(slot);
    return;
  }
  // Re-file against the new cursor. Orphans are dropped here: this is where a cancelled timer's
  // index is reclaimed and, with the chunk, its memory.
  slot.drain(
      pool_,
      [this](const TimerEntry& entry) {
        if (!handles_.pending(entry.index)) {
          handles_.release(entry.index, entry.generation);
          return;
        }
        const std::uint64_t tick = tick_of(entry.deadline);
        if (tick == cursor_) {
          due_.push_back(entry, pool_);
        } else {
          file(entry, tick);
        }
      },
      [this](const TimerEntry& entry) { handles_.prefetch_pending(entry.index); });
}

std::size_t TimingWheel::release_due(std::size_t budget, std::vector<Expired>& out) {
  std::size_t released = 0;
  while (released < budget && !due_.empty()) {
    const TimerEntry entry = due_.front();
    due_.pop_front(pool_);
    if (handles_.pending(entry.index)) {
      handles_.fire(entry.index, entry.generation);
      out.push_back(Expired{TimerHandle{entry.index, entry.generation}, entry.deadline, entry.payload});
      ++released;
    } else {
      handles_.release(entry.index, entry.generation);
    }
  }
  pending_ -= released;
  return released;
}

std::size_t TimingWheel::advance(std::uint64_t now, std::size_t limit, std::vector<Expired>& out) {
  if (now > now_) {
    now_ = now;
    now_tick_ = now / tick_;
  }
  std::size_t released = 0;
  while (released < limit) {
    if (!due_.empty()) {
      released += release_due(limit - released, out);
      continue;
    }
    const std::optional<SlotRef> next = earliest_slot();
    if (!next || next->start > now_tick_) break;
    open_slot(*next);
  }
  // Only a call that was not cut short may move the cursor past unopened time: when the limit
  // stopped it, the cursor must stay at the tick of the last release so that the rest of that
  // tick, and everything after it, still comes out in order.
  if (released < limit) cursor_ = now_tick_;
  return released;
}

std::uint64_t TimingWheel::range() const noexcept {
  // Accepted iff ceil(d / tick) <= cursor + span - 1, i.e. d <= (cursor + span - 1) * tick.
  const std::uint64_t last_tick = cursor_ > max_u64 - (span_ - 1) ? max_u64 : cursor_ + (span_ - 1);
  const std::uint64_t last = to_caller(last_tick);
  if (last < now_) return 0;
  const std::uint64_t width = last - now_;
  return width == max_u64 ? max_u64 : width + 1;
}

WheelStats TimingWheel::stats() const noexcept {
  WheelStats s;
  std::size_t entries = due_.size();
  for (unsigned level = 0; level < levels; ++level) {
    s.levels[level].occupied_slots = levels_[level].occupied.count();
    s.levels[level].entries = levels_[level].entries;
    entries += levels_[level].entries;
  }
  s.due_entries = due_.size();
  s.pending = pending_;
  s.orphans = entries - pending_;
  s.chunks_total = pool_.chunks_total();
  s.chunks_free = pool_.chunks_free();
  s.bytes_reserved = pool_.bytes_reserved() + handles_.bytes_reserved();
  return s;
}

void TimingWheel::check_invariants() const {
  auto fail = [](const std::string& what) { throw std::logic_error("delayd::wheel invariant violated: " + what); };

  // I1
  if (cursor_ > now_tick_) fail("I1: cursor is ahead of the now tick");
  if (now_tick_ != now_ / tick_) fail("I1: cached now tick is stale");

  std::vector<unsigned char> owned(handles_.capacity(), 0);
  std::size_t pending_seen = 0;
  auto own = [&](const TimerEntry& e, const char* where) {
    if (e.index >= owned.size()) fail(std::string("I5: entry index out of range in ") + where);
    if (owned[e.index] != 0) fail(std::string("I5: index named twice, again in ") + where);
    owned[e.index] = 1;
    if (e.generation != handles_.generation(e.index)) fail(std::string("I5: stale generation in ") + where);
    if (handles_.pending(e.index)) ++pending_seen;
  };

  // I2, I3
  for (unsigned level = 0; level < levels; ++level) {
    const Level& lv = levels_[level];
    if (!lv.occupied.consistent()) fail("I3: occupancy summary disagrees with its words");
    std::size_t level_entries = 0;
    for (std::size_t slot = 0; slot < lv.slots.size(); ++slot) {
      const ChunkList& list = lv.slots[slot];
      if (list.count_by_walking() != list.size()) fail("slot chain length disagrees with its size");
      if (list.empty() == lv.occupied.test(slot)) fail("I3: occupancy bit disagrees with slot contents");
      level_entries += list.size();
      list.for_each([&](const TimerEntry& e) {
        own(e, "a slot");
        const std::uint64_t tick = tick_of(e.deadline);
        if (tick <= cursor_ || tick - cursor_ >= span_) fail("I2: entry outside the cursor's window");
        if (level_for(tick) != level) fail("I2: entry filed at the wrong level");
        if (((tick >> (level * bits_)) & slot_mask_) != slot) fail("I2: entry filed in the wrong slot");
        if (level > 0 && lv.min_tick[slot] > tick) fail("I3: slot minimum above an entry's tick");
      });
    }
    if (level_entries != lv.entries) fail("level entry count disagrees with its slots");
  }

  // I4
  if (due_.count_by_walking() != due_.size()) fail("due chain length disagrees with its size");
  due_.for_each([&](const TimerEntry& e) {
    own(e, "the due list");
    if (tick_of(e.deadline) > cursor_ && e.deadline > now_) fail("I4: due entry is not due");
  });

  // I5
  handles_.for_each_free([&](std::uint32_t index, std::uint32_t generation) {
    if (index >= owned.size()) fail("I5: free index out of range");
    if (owned[index] != 0) fail("I5: index both free and named by an entry");
    owned[index] = 1;
    if (handles_.pending(index)) fail("I5: free index is pending");
    if (generation != handles_.generation(index)) fail("I5: free index carries a stale generation");
  });
  for (std::size_t i = 0; i < owned.size(); ++i) {
    if (owned[i] == 0) fail("I5: index neither free nor named by an entry (leaked)");
  }
  if (pending_seen != pending_) fail("I5: pending entries disagree with size()");
  if (handles_.count_pending() != pending_) fail("I5: pending bits disagree with size()");
}

}  // namespace delayd::wheel
