// The same header with the assertions off, in a translation unit of its own: the condition and
// the state must not be evaluated (they may be costly, or have effects).
#undef DELAYD_DEBUG_ASSERTS
#define DELAYD_DEBUG_ASSERTS 0
#include "base/debug_assert.hpp"

namespace delayd::base::testing {

// Runs a failing DELAYD_ASSERT whose condition and state count their evaluations; returns the count.
int evaluations_when_off() {
  int evaluated = 0;
  auto count = [&](bool v) {
    ++evaluated;
    return v;
  };
  DELAYD_ASSERT(count(false), "never checked when off", count(true));
  return evaluated;
}

}  // namespace delayd::base::testing
