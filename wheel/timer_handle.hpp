// TimerHandle: the caller's name for one scheduled timer.
//
// A handle is an index into the wheel's handle table plus the generation that index had when
// the timer was scheduled. The table bumps an index's generation every time the index is handed
// out again, so a handle kept after its timer fired or was cancelled can never reach the timer
// that now occupies the same index: every operation on a stale handle is a harmless no-op.
//
// Generation 0 is never handed out, which makes a default-constructed handle invalid. After
// 2^32 - 1 reuses of one index a generation repeats; a handle would have to be held across that
// many reuses of its own index to be confused, which the broker never does.
#pragma once

#include <cstdint>

namespace delayd::wheel {

struct TimerHandle {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;

  // True for every handle the wheel has handed out, fired, cancelled or stale alike; false only
  // for a handle that never named a timer (default-constructed, or from a beyond_range result).
  [[nodiscard]] constexpr bool valid() const noexcept { return generation != 0; }

  friend constexpr bool operator==(const TimerHandle&, const TimerHandle&) = default;
};

}  // namespace delayd::wheel
