// DELAYD_ASSERT: a check of an internal invariant in a hot path, on in the sanitizer and Debug
// builds and compiled away elsewhere, that prints the state it was given when it fails.
//
//     DELAYD_ASSERT(cond, "what must hold, in words", state...);
//
// On failure it writes one line to stderr and aborts:
//
//     delayd: assertion failed at wheel/timing_wheel.cpp:106: next (the earliest occupied slot
//     exists while timers are pending); pending_ = 3, cursor_ = 1795000000000
//
// Each `state` argument is printed as "<its source text> = <its value>", so a report carries the
// numbers needed to understand it (tokio's debug_assert!(cond, "{}", state) in spirit). Values
// are printed with operator<<; pass integers, strings and enums with an operator<<.
//
// When it is on: DELAYD_DEBUG_ASSERTS is defined to 1 (CMake sets it with DELAYD_SANITIZE and in
// Debug builds). When it is off, neither `cond` nor the state is evaluated, but both are still
// compiled, so an assertion cannot rot into code that no longer builds.
//
// What it is not for: anything a remote server says or any byte read from Redis or Kafka. Those
// are inputs, handled by the error model (broker/service.hpp), never asserted. An assertion
// states what the code itself guarantees; a release build keeps the safe fallback that follows
// it (the "unreachable, kept for safety" branch), so a broken invariant there degrades instead
// of crashing.
// Threading: stateless; callable from any thread.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

namespace delayd::base {

// "a = 1, b = 2" from the stringified argument list "a, b" and the values. The names are split
// at top-level commas (commas inside (), [], {} or <> belong to one argument).
template <typename... Values>
std::string format_state(std::string_view names, const Values&... values) {
  std::ostringstream out;
  std::size_t pos = 0;
  bool first = true;
  [[maybe_unused]] auto one = [&](const auto& value) {
    int depth = 0;
    std::size_t end = pos;
    for (; end < names.size(); ++end) {
      const char c = names[end];
      if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
      if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
      if (c == ',' && depth == 0) break;
    }
    std::string_view name = names.substr(pos, end - pos);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    out << (first ? "" : ", ") << name << " = " << value;
    first = false;
    pos = end + 1;
  };
  (one(values), ...);
  return out.str();
}

// Writes the failure line and aborts. Never returns.
[[noreturn]] inline void assertion_failed(const char* file, int line, const char* cond, const char* what,
                                          const std::string& state) {
  std::fprintf(stderr, "delayd: assertion failed at %s:%d: %s (%s)%s%s\n", file, line, cond, what,
               state.empty() ? "" : "; ", state.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace delayd::base

#if defined(DELAYD_DEBUG_ASSERTS) && DELAYD_DEBUG_ASSERTS
#define DELAYD_ASSERT(cond, what, ...)                                                                         \
  do {                                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                                \
      ::delayd::base::assertion_failed(__FILE__, __LINE__, #cond, what,                                        \
                                       ::delayd::base::format_state(#__VA_ARGS__ __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                                          \
  } while (false)
#else
// Compiled, never evaluated: the branch is dead, so the optimizer drops it whole.
#define DELAYD_ASSERT(cond, what, ...)                                             \
  do {                                                                             \
    if (false) {                                                                   \
      (void)(cond);                                                                \
      (void)::delayd::base::format_state(#__VA_ARGS__ __VA_OPT__(, ) __VA_ARGS__); \
    }                                                                              \
  } while (false)
#endif
