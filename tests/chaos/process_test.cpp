// kill -9 of delayd, three times, while 3 000 jobs fall due over 10 s; each time a new delayd is
// started at once. Expected: every job delivered at least once (duplicates are allowed after a
// crash and counted), none early, every restart comes up and the last one still runs at the end.
// "delayd up" prints "restarted <came up>/<restarts>": here the original process is meant to be
// gone.
#include <catch2/catch.hpp>

#include "chaos_support.hpp"

using namespace delayd::chaos;
using namespace std::chrono_literals;

TEST_CASE("kill9_repeated", "[chaos]") {
  World w("chaos-kill9");
  w.create_topics({"orders", "mail"});
  ReadyWatcher ready(w, {w.ready_topic("orders"), w.ready_topic("mail")});
  Expected expected;
  DelaydProcess delayd(w);
  constexpr int kKills = 3;
  int came_up = 0;
  CaseLine line("kill9_repeated", expected, ready, [&] {
    const std::string last = up_word(delayd);
    const std::string restarts = std::to_string(came_up) + "/" + std::to_string(kKills);
    return last == "yes" ? "restarted " + restarts : last + " (restarts that came up " + restarts + ")";
  });
  REQUIRE(start_delayd(delayd));

  Sender pub(w);
  publish_spread(pub, expected, "job-", 3000, now_ms() + 500, 10000, {"orders", "mail"});
  pub.flush();

  std::vector<std::size_t> killed_at;  // delivered so far at each kill
  for (int k = 0; k < kKills; ++k) {
    // Mid-flight: 250 more jobs out since this instance came up, the rest pending or in flight.
    const std::size_t target = std::min(expected.size(), ready.seen_of(expected) + 250);
    ready.poll_until([&] { return ready.seen_of(expected) >= target || !delayd.running(); }, 20s);
    killed_at.push_back(ready.seen_of(expected));
    if (delayd.running()) delayd.kill9();
    if (!start_delayd(delayd)) break;
    ++came_up;
  }
  std::string kills;
  for (auto n : killed_at) kills += (kills.empty() ? "" : "/") + std::to_string(n);
  line.note("delivered at the kills", kills);

  settle(ready, expected, delayd, 60s);
  const std::string up = up_word(delayd);
  const Tally t = line.print();
  check_outcome(t, w, false, up);
  CHECK(came_up == kKills);
  CHECK(up == "yes");
  if (delayd.running()) delayd.stop();
}
