// base/backoff.hpp: the one doubling rule, in both its shapes.
#include "base/backoff.hpp"

#include <catch2/catch.hpp>
#include <vector>

using std::chrono::milliseconds;

TEST_CASE("doubling: base, twice, four times ... up to the cap, whatever the retry number", "[unit][backoff]") {
  CHECK(delayd::base::doubling(milliseconds(500), milliseconds(30000), 0) == milliseconds(500));
  CHECK(delayd::base::doubling(milliseconds(500), milliseconds(30000), 1) == milliseconds(500));
  CHECK(delayd::base::doubling(milliseconds(500), milliseconds(30000), 2) == milliseconds(1000));
  CHECK(delayd::base::doubling(milliseconds(500), milliseconds(30000), 6) == milliseconds(16000));
  CHECK(delayd::base::doubling(milliseconds(500), milliseconds(30000), 7) == milliseconds(30000));
  CHECK(delayd::base::doubling(milliseconds(500), milliseconds(30000), 1'000'000) == milliseconds(30000));
  CHECK(delayd::base::doubling(milliseconds(0), milliseconds(100), 50) == milliseconds(0));
}

TEST_CASE("Backoff: the same sequence one failure at a time, and from the start after reset", "[unit][backoff]") {
  delayd::base::Backoff b(milliseconds(100), milliseconds(1000));
  std::vector<long> seen;
  for (int i = 0; i < 6; ++i) seen.push_back(static_cast<long>(b.next().count()));
  CHECK(seen == std::vector<long>{100, 200, 400, 800, 1000, 1000});
  b.reset();
  CHECK(b.next() == milliseconds(100));
  // The stateful shape and the counted one agree retry by retry.
  delayd::base::Backoff c(milliseconds(1000), milliseconds(60000));
  for (int n = 1; n <= 10; ++n) CHECK(c.next() == delayd::base::doubling(milliseconds(1000), milliseconds(60000), n));
}
