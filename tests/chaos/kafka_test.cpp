// The Kafka broker restarted (SIGTERM, then started again on the same data dir) while jobs are
// due and more are arriving. delayd must ride it out: jobs may be late, none lost, none early,
// and the delayd started at the beginning still runs at the end.
//
// partition_kafka_at_start: delayd started while every packet it sends to Kafka is dropped (a real
// cut: network_cut.hpp), jobs for it already waiting in the ingest topic. Start-up must not end
// the process: the version interlock's look at the consumer groups gives up after its bound with
// one warning (broker/service.cpp, kOptionalStepBound), and the rest waits for Kafka, /healthz
// saying so from the loop's first turn on and /readyz 503 throughout, while the jobs fall due. Once the cut heals, it
// joins and delivers every job: none lost, none early, none twice.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "chaos_support.hpp"
#include "network_cut.hpp"

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

TEST_CASE("partition_kafka_at_start", "[chaos][partition]") {
  require_cuts();
  World w("chaos-kafka-cut-at-start");
  w.create_topics({"orders", "mail"});
  ReadyWatcher ready(w, {w.ready_topic("orders"), w.ready_topic("mail")});
  Expected expected;
  DelaydProcess delayd(w);
  delayd.run_as(kCutUid, kCutGid);
  delayd.set_die_with_test(true);
  const std::uint16_t admin_port = delayd::e2e::free_port();
  delayd.set_env("DELAYD_ADMIN_LISTEN", "127.0.0.1:" + std::to_string(admin_port));
  CaseLine line("partition_kafka_at_start", expected, ready, [&] { return up_word(delayd); });

  Sender pub(w);
  publish_spread(pub, expected, "waiting-", 600, now_ms() + 10000, 6000, {"orders", "mail"});
  pub.flush();
  {
    NetworkCut cut(kCutUid, {port_of(w.bootstrap)});
    const std::int64_t started = now_ms();
    // Its line says the interlock was skipped, not that the process ended: start_until() throws
    // if delayd exits before the line, or the line does not come.
    delayd.start_until("the version interlock's look at the consumer groups: skipped", 30s);
    line.note("interlock skipped after ms", std::to_string(now_ms() - started));
    // Still cut off, it runs on and says so as soon as its loop turns: start-up's questions to
    // Kafka went unanswered, so a consumer group not joined is an outage at once (/healthz
    // degraded naming it), and /readyz is 503 throughout: an instance that has not joined its
    // groups does no work, and a rolling update must not take it for one that does.
    std::string health;
    std::string readiness;
    std::int64_t loop_turning = 0;  // ms after the start of /healthz's first answer past start-up
    std::int64_t named = 0;         // ... of its first answer naming the group's outage
    while (now_ms() - started < 40000 && delayd.running()) {
      health = delayd::e2e::http_get(admin_port, "/healthz");
      readiness = delayd::e2e::http_get(admin_port, "/readyz");
      {
        INFO("/readyz while cut off:\n" << readiness);
        CHECK_THAT(readiness, Catch::StartsWith("HTTP/1.0 503"));
      }
      const bool past_start_up = health.find("starting up") == std::string::npos && !health.empty();
      if (past_start_up && loop_turning == 0) loop_turning = now_ms() - started;
      if (health.find("kafka (group) unavailable") != std::string::npos) {
        named = now_ms() - started;
        break;
      }
      if (past_start_up) CHECK_THAT(health, !Catch::Contains("ok\n"));  // never "ok" while it has never joined
      ready.poll(200ms);
    }
    line.note("loop turning after ms", std::to_string(loop_turning));
    line.note("healthz named kafka after ms", std::to_string(named));
    REQUIRE(delayd.running());
    INFO("/healthz during the cut:\n" << health << "\n/readyz:\n" << readiness);
    CHECK_THAT(health, Catch::Contains("kafka (group) unavailable: consumer group " + w.group + " not joined"));
    CHECK_THAT(readiness, Catch::Contains("kafka (group)"));
    CHECK(ready.seen_of(expected) == 0);
    cut.heal();
  }
  settle(ready, expected, delayd, 90s);
  // Joined once the cut healed: ready, and the outage said over.
  std::string readiness = delayd::e2e::http_get(admin_port, "/readyz");
  for (int i = 0; i < 50 && readiness.find("HTTP/1.0 200") != 0; ++i) {
    ready.poll(200ms);
    readiness = delayd::e2e::http_get(admin_port, "/readyz");
  }
  CHECK_THAT(readiness, Catch::StartsWith("HTTP/1.0 200"));
  // One outage a group (the ingest topic's and the status topic's), each said over once.
  CHECK(delayd::e2e::count_in_log(w.log_path, "kafka (group) unavailable: ") == 2);
  CHECK(delayd::e2e::count_in_log(w.log_path, "kafka (group) is back") == 2);
  const std::string up = up_word(delayd);
  const Tally t = line.print();
  check_outcome(t, w, true, up);
  if (delayd.running()) delayd.stop();
}
