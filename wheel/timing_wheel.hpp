// TimingWheel: the in-memory heart of delayd, a three-level hierarchical timing wheel.
//
// ------------------------------------------------------------------------------------------
// Purpose
// ------------------------------------------------------------------------------------------
// Every pending job lives in Redis. The broker loads into this wheel the jobs due before its
// horizon, now() + range(), and the wheel hands each back once its deadline has passed. The wheel
// does no I/O, never reads a clock (the caller passes `now`), and never allocates per timer once
// it has grown to its working size.
//
// ------------------------------------------------------------------------------------------
// Time and ticks
// ------------------------------------------------------------------------------------------
// Times are absolute unsigned 64-bit values in caller units; the broker passes Unix epoch
// milliseconds. The wheel counts absolute ticks of `tick` caller units:
//
//     deadline tick  = ceil(deadline / tick)        (rounded UP)
//     now tick       = floor(now / tick)            (rounded DOWN)
//
// A timer is released only once the now tick has reached its deadline tick, so the `now` that
// releases it is >= its deadline. A timer must never fire early because delayd promises "not
// before deliver-at": a consumer that receives an order-timeout message a millisecond before the
// timeout may cancel an order the customer was still allowed to pay. Lateness is the price: when
// the caller advances exactly at next_expiry(), a timer is released less than one tick after
// its deadline (exactly on time with a 1 ms tick and millisecond deadlines).
//
// The cursor is the tick through which the wheel has filed everything: all timers whose tick is
// <= cursor are on the due list, all others are in the levels. advance() moves the cursor
// towards the now tick; it lags behind only while an advance() was cut short by its limit.
//
// ------------------------------------------------------------------------------------------
// Levels (b = slot_bits, default 8; shown for the default 1 ms tick)
// ------------------------------------------------------------------------------------------
//     level  slots  slot granularity   level span         with b = 8, tick = 1 ms
//       0     2^b     1 tick            2^b ticks          1 ms          .. 256 ms
//       1     2^b     2^b ticks         2^2b ticks         256 ms        .. 65.5 s
//       2     2^b     2^2b ticks        2^3b ticks         65.5 s        .. 4.66 h
//
// A timer is filed by the highest base-2^b digit in which its deadline tick differs from the
// cursor (the xor of the two, as in tokio), in the slot named by that digit of its deadline
// tick. So a level-0 slot holds exactly one tick, and a level-L slot spans the whole level below.
// When the cursor enters the span of a level-1 or level-2 slot, that slot is opened and each
// live entry is re-filed against the new cursor: one level down or further, or straight onto
// the due list if its tick is the slot's first. Nothing is ever filed with slack (unlike Linux,
// which lets a timer fire up to 12% late to save cascades): broker timers mostly fire rather
// than get cancelled, and 12% of four hours is half an hour.
//
// The top level also holds deadlines in the next 2^3b-tick block: their top digit is at or
// below the cursor's and their slot counts as one rotation later. That is what makes the range
// a sliding window (2^3b ticks from the cursor) instead of "until the end of the aligned block".
//
// Because of the xor filing, every timer in level L lies within the cursor's current level-(L+1)
// span and every timer in level L+1 lies after it: the earliest timer is always in the first
// occupied slot of the lowest non-empty level. next_expiry() therefore looks at one slot, found
// with two count-trailing-zeros in that level's OccupancyBitmap.
//
// ------------------------------------------------------------------------------------------
// Memory layout
// ------------------------------------------------------------------------------------------
// A slot is a FIFO of 2 KiB chunks of 24-byte entries {deadline, payload, index, generation}
// (ChunkList), drawn from a pool the wheel owns. Opening a slot reads its chunks front to back
// and appends to the tails of the slots below: sequential reads, and writes to at most 2^b hot
// tail chunks. The only per-timer random access on a cascade or a fire is one bit of the pending
// bitmap (HandleTable), which stays in cache and is prefetched a few entries ahead. The
// alternative this avoids is the classic doubly-linked timer node: O(1) unlink on cancel, but
// one cache miss per timer for every cascade and every expiry, which at ten million timers makes
// such a wheel slower than a heap.
//
// Bytes per pending timer: 24 (entry) + 4 (generation) + 1/8 (pending bit), plus the unused
// tail of at most one chunk per non-empty slot (measured: 28.6 B at ten million timers). The
// handle table also keeps 64 freed indices back from reuse so that the one cache miss left on
// the fire -> reschedule path can be prefetched away (see HandleTable).
//
// Cancel does not touch the slot: it clears the timer's pending bit, and the entry stays where
// it is as an orphan. Its memory (entry and index) is reclaimed when its slot is next opened,
// at the latest when its deadline arrives, i.e. within range() of the cancel. That bounds the
// garbage to what was cancelled during the last range(); the broker cancels rarely, and buys
// with it cascades and expiries that never chase pointers. Chunk memory returns to the wheel's
// pool, not to the system: the wheel keeps its high-water mark, as a vector keeps its capacity.
//
// ------------------------------------------------------------------------------------------
// Cost of each operation
// ------------------------------------------------------------------------------------------
//   schedule      O(1): one xor, one append, one bitmap bit, one handle.
//   cancel        O(1): a generation compare and a bit.
//   next_expiry   O(levels): one bitmap search per level, stopping at the first non-empty one.
//   advance       O(slots opened + entries moved or released). Empty slots are never visited,
//                 so a jump of an hour over an empty wheel costs what a jump of 1 ms does. Each
//                 timer is moved at most twice (level 2 -> 1 -> 0) before it fires. Orphans are
//                 dropped as their slots are opened and do not count against `limit`.
//
// ------------------------------------------------------------------------------------------
// Release order
// ------------------------------------------------------------------------------------------
// Timers are released in order of deadline tick and, within a tick, in the order they were
// scheduled; in particular timers with the same deadline come out in schedule order. A timer
// scheduled with a deadline tick at or before the cursor is appended to the due list: it comes
// out after everything already due, as if its tick were the cursor. (So is a timer whose
// deadline has passed but whose tick lies beyond the cursor's range, which only happens while
// an advance() that was cut short by its limit has left the cursor far behind now(); no timer
// with the same deadline can then be waiting in the levels.)
//
// ------------------------------------------------------------------------------------------
// Threading
// ------------------------------------------------------------------------------------------
// None. A wheel is owned by one thread at a time and no method may run concurrently with any
// other, const ones included. The broker drives it from the scheduling loop's thread (through
// broker/scheduler.hpp); there is no timer thread.
//
// ------------------------------------------------------------------------------------------
// Invariants (checked by check_invariants())
// ------------------------------------------------------------------------------------------
//   I1  cursor <= now tick; now() never decreases.
//   I2  every entry in level L, slot s: cursor < tick < cursor + 2^3b, L is the highest digit
//       in which tick and cursor differ (capped at 2), s is digit L of tick.
//   I3  a slot is marked in its level's bitmap iff it holds entries; for L >= 1 its recorded
//       minimum tick is <= the tick of every entry in it.
//   I4  every due entry has tick <= cursor or a deadline <= now().
//   I5  every index handed out is named by exactly one entry (in a slot or on the due list) or
//       is free, never both; entries carry their index's current generation; the pending
//       indices are exactly size().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "wheel/chunk_list.hpp"
#include "wheel/handle_table.hpp"
#include "wheel/occupancy_bitmap.hpp"
#include "wheel/timer_entry.hpp"
#include "wheel/timer_handle.hpp"

namespace delayd::wheel {

struct WheelConfig {
  std::uint64_t tick = 1;  // tick length in caller units (the broker uses ms); >= 1
  unsigned slot_bits = 8;  // 2^slot_bits slots per level, 1..12; 3 levels
};

enum class ScheduleStatus { scheduled, beyond_range };

struct ScheduleResult {
  ScheduleStatus status;
  TimerHandle handle;  // invalid unless status == scheduled
};

struct Expired {
  TimerHandle handle;
  std::uint64_t deadline;  // as scheduled, caller units
  std::uint64_t payload;
};

struct LevelStats {
  std::size_t occupied_slots = 0;
  std::size_t entries = 0;  // including cancelled entries not yet reclaimed
};

struct WheelStats {
  std::array<LevelStats, 3> levels;
  std::size_t due_entries = 0;   // on the due list, cancelled ones included
  std::size_t pending = 0;       // == size()
  std::size_t orphans = 0;       // cancelled entries still held in slots or on the due list
  std::size_t chunks_total = 0;  // pool high-water mark
  std::size_t chunks_free = 0;
  std::size_t bytes_reserved = 0;  // chunks + handle table
};

class TimingWheel {
 public:
  static constexpr unsigned levels = 3;

  // Pre: cfg.tick >= 1 and 1 <= cfg.slot_bits <= 12; std::invalid_argument otherwise.
  // Post: empty; now() == start; the cursor is floor(start / tick).
  explicit TimingWheel(WheelConfig cfg = {}, std::uint64_t start = 0);

  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;
  TimingWheel(TimingWheel&&) noexcept = default;
  TimingWheel& operator=(TimingWheel&&) noexcept = default;
  ~TimingWheel() = default;

  // Files a timer for `deadline` carrying `payload`.
  // Accepted iff deadline < now() + range() or deadline <= now(). A deadline whose tick has
  // already been reached goes on the due list and is released by the next advance() (subject to
  // its limit); with tick == 1 that is every deadline <= now().
  // Post (scheduled): size() grew by one; the handle is valid and pending.
  // Post (beyond_range): nothing changed; the handle is invalid. Never clamps.
  // O(1). Throws std::bad_alloc only while growing past the high-water mark.
  ScheduleResult schedule(std::uint64_t deadline, std::uint64_t payload);

  // True iff h named a pending timer, which is now cancelled and will never be released.
  // Stale handles (fired, cancelled, index reused), foreign and default handles: false, no-op.
  // Post (true): size() shrank by one. The entry's memory is reclaimed when its slot is opened.
  // O(1).
  bool cancel(TimerHandle h) noexcept {
    if (!handles_.cancel(h)) return false;
    --pending_;
    return true;
  }

  // Moves now() to max(now(), now) and releases due timers into `out`, appending at most
  // `limit` of them in release order (see the header). Returns how many were appended.
  // Post: every released timer has deadline <= now(); if fewer than `limit` were released,
  // nothing due remains (next_expiry() is then > now() or nullopt) and the cursor is the now
  // tick; otherwise the remaining due timers come out on the next call, with the same or a
  // later now, ahead of anything that falls due later.
  // Cost: O(slots opened + entries moved, released or reclaimed); independent of elapsed time.
  std::size_t advance(std::uint64_t now, std::size_t limit, std::vector<Expired>& out);

  // The earliest time (caller units) at which advance() would release something; nullopt iff
  // size() == 0. Never later than the true next release. It is exact unless the earliest entry
  // has been cancelled (then it is early, advance() releases nothing and the next call answers
  // later). A value <= now() means something is due already. O(levels).
  [[nodiscard]] std::optional<std::uint64_t> next_expiry() const noexcept;

  // The largest `now` passed so far (or the start).
  [[nodiscard]] std::uint64_t now() const noexcept { return now_; }

  // The exclusive horizon, in caller units, measured from now(): every deadline d with
  // d < now() + range() is accepted. It equals (cursor + 2^3b - 1) * tick + 1 - now(), which is
  // 2^3b ticks (2^24 with the defaults) when tick == 1 and the cursor has caught up with now(),
  // up to tick - 1 less with longer ticks (the horizon is tick-aligned), and less while an
  // advance() cut short by its limit has left the cursor behind. Saturates at 0 and 2^64 - 1.
  [[nodiscard]] std::uint64_t range() const noexcept;

  // Pending timers (scheduled, neither fired nor cancelled).
  [[nodiscard]] std::size_t size() const noexcept { return pending_; }
  [[nodiscard]] bool empty() const noexcept { return pending_ == 0; }

  // The tick through which everything has been filed (see "Time and ticks").
  [[nodiscard]] std::uint64_t cursor() const noexcept { return cursor_; }
  [[nodiscard]] const WheelConfig& config() const noexcept { return cfg_; }
  [[nodiscard]] WheelStats stats() const noexcept;

  // Walks the whole wheel (O(entries + capacity)) and throws std::logic_error naming the first
  // violated invariant (I1..I5 in the header). For tests.
  void check_invariants() const;

 private:
  struct Level {
    OccupancyBitmap occupied;
    std::vector<ChunkList> slots;
    std::vector<std::uint64_t> min_tick;  // per slot; used for levels >= 1
    std::size_t entries = 0;
  };

  struct SlotRef {
    unsigned level;
    std::size_t slot;
    std::uint64_t start;  // first tick of the slot's span, in its rotation
  };

  [[nodiscard]] std::uint64_t tick_of(std::uint64_t deadline) const noexcept {
    if (tick_ == 1) return deadline;
    return deadline / tick_ + (deadline % tick_ != 0 ? 1 : 0);
  }
  [[nodiscard]] std::uint64_t to_caller(std::uint64_t tick) const noexcept;
  [[nodiscard]] unsigned level_for(std::uint64_t tick) const noexcept;
  [[nodiscard]] std::optional<SlotRef> earliest_slot() const noexcept;

  void file(const TimerEntry& entry, std::uint64_t tick);
  void open_slot(const SlotRef& ref);
  std::size_t release_due(std::size_t budget, std::vector<Expired>& out);

  WheelConfig cfg_;
  std::uint64_t tick_;
  unsigned bits_;
  std::uint64_t slot_mask_;
  std::uint64_t span_;      // 2^(3b) ticks: the window the levels can hold
  std::uint64_t now_;       // caller units
  std::uint64_t now_tick_;  // floor(now_ / tick_)
  std::uint64_t cursor_;    // ticks
  std::size_t pending_ = 0;

  ChunkPool pool_;
  HandleTable handles_;
  ChunkList due_;
  std::array<Level, levels> levels_;
};

}  // namespace delayd::wheel
