// cancel_and_wait() (admin/cancel_flow.hpp): each verdict, and that nothing is published for a job
// that is not waiting.
#include "admin/cancel_flow.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace delayd::admin;
using std::chrono::milliseconds;

namespace {

// A job whose state reads are scripted: each read takes the next state, the last one repeats.
struct Scripted {
  std::vector<std::string> states;
  std::size_t reads = 0;
  int published = 0;
  std::string read() { return states[std::min(reads++, states.size() - 1)]; }
  CancelOutcome run(milliseconds wait = milliseconds(500)) {
    return cancel_and_wait([this] { return read(); }, [this] { ++published; }, wait);
  }
};

}  // namespace

TEST_CASE("cancel_and_wait: a waiting job that delayd cancels is cancelled, after one publish", "[unit][cancel]") {
  Scripted job{{"delay", "delay", "cancelled"}};
  const CancelOutcome o = job.run();
  CHECK(o.verdict == CancelVerdict::cancelled);
  CHECK(o.state == "cancelled");
  CHECK(job.published == 1);
}

TEST_CASE("cancel_and_wait: no job, or a job no longer waiting, publishes nothing", "[unit][cancel]") {
  Scripted none{{"missing"}};
  CHECK(none.run().verdict == CancelVerdict::no_job);
  CHECK(none.published == 0);
  Scripted done{{"ready"}};
  const CancelOutcome o = done.run();
  CHECK(o.verdict == CancelVerdict::not_waiting);
  CHECK(o.state == "ready");
  CHECK(done.published == 0);
}

TEST_CASE("cancel_and_wait: the job went out first, or delayd did not act within the wait", "[unit][cancel]") {
  Scripted raced{{"delay", "ready"}};
  CHECK(raced.run().verdict == CancelVerdict::not_cancelled);
  Scripted silent{{"delay"}};
  const CancelOutcome o = silent.run(milliseconds(120));
  CHECK(o.verdict == CancelVerdict::pending);
  CHECK(o.state == "delay");
  CHECK(silent.published == 1);
  CHECK(silent.reads >= 3);  // read again every 50 ms until the wait was over
}
