// DELAYD_ASSERT (base/debug_assert.hpp): what a failure prints, that it aborts, and that a build
// with the assertions off evaluates nothing.
#include "base/debug_assert.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <string>

namespace delayd::base::testing {
int evaluations_when_off();
}

namespace {

struct Outcome {
  int signal = 0;   // the signal that ended the child, 0 if it exited
  std::string err;  // what it wrote to stderr
};

// Runs f in a forked child with stderr captured.
template <typename F>
Outcome run_child(F f) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    f();
    ::_exit(0);
  }
  ::close(fds[1]);
  Outcome out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.err.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

}  // namespace

TEST_CASE("a failing DELAYD_ASSERT prints where, what and the state it was given, then aborts", "[unit][assert]") {
  const Outcome out = run_child([] {
    const unsigned pending = 3;
    const std::string job_id = "order-7";
    DELAYD_ASSERT(pending == 0, "nothing is pending here", pending, job_id, std::min(1, 2));
  });
  CHECK(out.signal == SIGABRT);
  CHECK_THAT(out.err, Catch::StartsWith("delayd: assertion failed at ") && Catch::Contains("debug_assert_test.cpp:") &&
                          Catch::Contains(": pending == 0 (nothing is pending here); ") &&
                          Catch::Contains("pending = 3, job_id = order-7, std::min(1, 2) = 1"));
}

TEST_CASE("a DELAYD_ASSERT that holds does nothing, with or without state", "[unit][assert]") {
  const Outcome out = run_child([] {
    DELAYD_ASSERT(1 + 1 == 2, "arithmetic");
    DELAYD_ASSERT(true, "with state", 42);
  });
  CHECK(out.signal == 0);
  CHECK(out.err.empty());
}

TEST_CASE("with the assertions off, neither the condition nor the state is evaluated", "[unit][assert]") {
  CHECK(delayd::base::testing::evaluations_when_off() == 0);
}
