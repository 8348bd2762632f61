// What a test needs that is not in the build (a tool on PATH, an opt-in), asked for so that its
// absence never passes: under CI=true a missing tool fails the test; elsewhere the test process
// prints "SKIPPED: <why>" and exits kSkipExit, which ctest reports as skipped ("Not Run") because
// the test is registered with SKIP_RETURN_CODE 77 (tests/CMakeLists.txt states the rule; the
// shell and Python tests have the same in tests/support/requires.sh and requires.py).
//
// Call these first in a TEST_CASE, before anything it starts: skipping exits the process there,
// without unwinding (no destructor runs, Catch reports nothing). ctest runs one case per process
// (catch_discover_tests, or one add_test per case), so the exit skips that case alone; run by
// hand, the binary stops at the first case skipped.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

namespace delayd::testing {

// The exit status ctest is told (SKIP_RETURN_CODE) means "skipped"; 77 as in automake.
inline constexpr int kSkipExit = 77;

// CI=true (or 1) in the environment: every tool must be there.
inline bool under_ci() {
  const char* v = std::getenv("CI");
  return v != nullptr && (std::string_view(v) == "true" || std::string_view(v) == "1");
}

// The executable `tool` names: itself when it holds a '/', otherwise the first of that name on
// PATH (as the shell finds it). "" when there is none.
inline std::string find_tool(const std::string& tool) {
  if (tool.empty()) return "";
  if (tool.find('/') != std::string::npos) return ::access(tool.c_str(), X_OK) == 0 ? tool : "";
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "";
  for (;;) {
    const std::size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    const std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + tool;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return "";
    rest.remove_prefix(colon + 1);
  }
}

// Ends the test process as skipped, saying why on standard output (ctest keeps it in its log).
[[noreturn]] inline void skip_test(std::string_view why) {
  std::cout << "SKIPPED: " << why << std::endl;
  std::fflush(nullptr);
  std::_Exit(kSkipExit);
}

// The path of `tool` (a name looked up on PATH, or a path). Missing: under CI the test fails with
// `how_to_get` (where the tool comes from); elsewhere it is skipped with the same words.
inline std::string require_tool(const std::string& tool, std::string_view how_to_get) {
  std::string found = find_tool(tool);
  if (!found.empty()) return found;
  if (under_ci()) FAIL(tool << " not found (" << how_to_get << "); under CI=true every tool must be installed");
  skip_test(tool + " not found (" + std::string(how_to_get) + ")");
}

// A setup the test needs that the environment does not describe (a stack started with an
// option, say): under CI the test fails with `what`; elsewhere it is skipped with the same words.
inline void require_setup(bool present, std::string_view what) {
  if (present) return;
  if (under_ci()) FAIL(what << "; under CI=true the setup must be there");
  skip_test(what);
}

// A deliberate opt-in (a long run, say): without the environment variable `name` set and
// non-empty, the test is skipped, under CI too; `how` says how to opt in.
inline void require_opt_in(const char* name, std::string_view how) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') skip_test(std::string(name) + " is not set: " + std::string(how));
}

}  // namespace delayd::testing
