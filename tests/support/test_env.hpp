// Helpers shared by the integration tests: the stack's addresses from the environment and
// names that no other run uses. A missing variable fails the test (never a silent skip).
#pragma once

#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace delayd::testing {

inline std::string require_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    FAIL(name << " is not set: start the stack with scripts/stack.sh up and export its env "
                 "(scripts/test.sh does both)");
  }
  return v;
}

// Unique per process and call: pid plus a steady-clock reading.
inline std::string unique_name(const std::string& base) {
  static unsigned counter = 0;
  return base + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000) + "-" +
         std::to_string(++counter);
}

}  // namespace delayd::testing
