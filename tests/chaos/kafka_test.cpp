// The Kafka broker restarted (SIGTERM, then started again on the same data dir) while jobs are
// due and more are arriving. delayd must ride it out: jobs may be late, none lost, none early,
// and the delayd started at the beginning still runs at the end.
#include "chaos_support.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

using namespace delayd::chaos;
using namespace std::chrono_literals;

TEST_CASE("kafka_restart", "[chaos]") {
  World w("chaos-kafka-restart");
  w.create_topics({"orders", "mail"});
  ServerGuard guard("kafka");
  ReadyWatcher ready(w, {w.ready_topic("orders"), w.ready_topic("mail")});
  Expected expected;
  DelaydProcess delayd(w);
  CaseLine line("kafka_restart", expected, ready, [&] { return up_word(delayd); });
  REQUIRE(start_delayd(delayd));

  Sender pub(w);
  publish_spread(pub, expected, "before-", 1500, now_ms() + 500, 8000, {"orders", "mail"});
  pub.flush();
  ready.poll_until([&] { return ready.seen_of(expected) >= 100 || !delayd.running(); }, 30s);

  std::atomic<bool> done{false};
  ScriptResult restart;
  const std::int64_t fault_start = now_ms();
  {
    std::jthread fault([&] {
      restart = run_stack_script({"restart", "kafka"});
      done = true;
    });
    // Arriving while the broker goes down and comes back: they wait in this producer's queue.
    int sent = 0;
    while (!done || sent < 500) {
      for (int i = 0; i < 10 && sent < 500; ++i, ++sent) {
        const std::string id = "during-" + std::to_string(sent);
        const std::int64_t at = now_ms() + (sent * 37) % 3000;
        expected[id] = at;
        pub.send(delayd::e2e::job_at(id, at, "value of " + id, std::nullopt, sent % 2 ? "orders" : "mail"));
      }
      pub.poll();
      ready.poll(100ms);
    }
  }
  line.note("restart took ms", std::to_string(now_ms() - fault_start));
  {
    INFO("scripts/stack.sh restart kafka:\n" << restart.output);
    REQUIRE(restart.status == 0);
  }
  pub.flush();

  // Back from a restart, the broker loads every partition it holds (thousands by the end of a CI
  // run: 22 s for 2 887) and its group coordinator waits out the sessions of the members that
  // lost contact before delayd's consumers and the watcher are assigned again: most of a minute
  // on a slow day. The wait ends as soon as every job is seen.
  settle(ready, expected, delayd, 120s);
  const std::string up = up_word(delayd);
  const Tally t = line.print();
  check_outcome(t, w, true, up);
  if (delayd.running()) delayd.stop();
}
