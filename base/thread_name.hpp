// The name a thread shows in `top -H`, `ps -L`, /proc/<pid>/task/*/comm, gdb and perf, so that
// an operator can tell which of delayd's threads uses the CPU.
//
// Threading: names the calling thread only.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace delayd::base {

// Linux keeps 15 bytes of a thread's name (16 with the terminating NUL); longer names are cut.
inline constexpr std::size_t kThreadNameMax = 15;

// Names the calling thread `name` (cut to kThreadNameMax bytes). Best effort: a failure changes
// nothing else.
inline void name_this_thread(std::string_view name) {
  const std::string cut(name.substr(0, kThreadNameMax));
  ::pthread_setname_np(::pthread_self(), cut.c_str());
}

}  // namespace delayd::base
