#include "wheel/handle_table.hpp"

#include <bit>
#include <stdexcept>

namespace delayd::wheel {

TimerHandle HandleTable::acquire_fresh() {
  if (generations_.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("delayd::wheel: all 2^32 timer indices are in use");
  }
  const auto index = static_cast<std::uint32_t>(generations_.size());
  generations_.push_back(1);
  if ((index & 63) == 0) pending_bits_.push_back(0);
  set_pending(index);
  return TimerHandle{index, 1};
}

std::size_t HandleTable::count_pending() const noexcept {
  std::size_t n = 0;
  for (std::uint64_t word : pending_bits_) n += static_cast<std::size_t>(std::popcount(word));
  return n;
}

}  // namespace delayd::wheel
