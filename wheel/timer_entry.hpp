// TimerEntry: what a wheel slot stores for one timer.
//
// 24 bytes, kept whole so that opening a slot never has to leave the slot's own memory for
// anything but one bit of the pending bitmap: the deadline to re-file it by (and to return),
// the payload to return, and the handle to return, generation included, so firing does not
// have to read the handle table either.
#pragma once

#include <cstdint>

namespace delayd::wheel {

// No default member initialisers on purpose: chunks are allocated without being cleared, and
// the first write to an entry is the entry itself (a zeroing pass over every new chunk would
// double the memory traffic of a growing wheel).
struct TimerEntry {
  std::uint64_t deadline;  // caller units, exactly as scheduled
  std::uint64_t payload;   // opaque to the wheel
  std::uint32_t index;     // handle table index; owned by this entry until it is released
  std::uint32_t generation;
};

static_assert(sizeof(TimerEntry) == 24, "slot memory per timer is part of the performance budget");

}  // namespace delayd::wheel
