// The job lifecycle against the real stack: consumers' status reports (running, finished,
// failed) with redelivery and the dead-letter topic after max_process_attempts; reports out of
// order, duplicated, for unknown ids and in a storm of 100 000; redelivery on silence
// (ack_timeout_ms); reschedules across the load window; repeating jobs; and all of it across a
// kill -9. The test plays the consumer: it reads the ready topics and reports on the status topic,
// keyed by job-id. The first test reports as soon as it reads a record, as a consumer does; the
// others wait until Redis shows the delivery settled (settled()), each to test its own subject.
#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "contract/time_format.hpp"
#include "harness.hpp"

using namespace delayd::e2e;
using delayd::connectors::Record;
using Records = std::vector<Record>;

namespace {

// Waits (up to 5 s) until Redis shows the delivery of `id` settled: not delay, nothing in flight.
// A consumer reads a ready record as soon as Kafka has it, which may be before delayd has
// settled it; tests of other things wait for that, the first test covers reports sent at once.
bool settled(JobReader& redis, const std::string& id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const auto state = redis.field(id, "state");
    if (state && *state != "delay" && !redis.field(id, "firing_at")) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// "id state, id state, ..." of these jobs, for messages.
std::string states_of(JobReader& redis, const std::vector<std::string>& ids) {
  const auto states = redis.states(ids);
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i == 0 ? "" : ", ") + ids[i] + " " + states[i];
  return out;
}

// The loop counters of /stats; empty while the endpoint does not answer.
std::map<std::string, std::int64_t> loop_counters(std::uint16_t port) {
  const std::string response = http_get(port, "/stats");
  const auto at = response.find("\r\n\r\n");
  if (response.find(" 200 ") == std::string::npos || at == std::string::npos) return {};
  const auto j = nlohmann::json::parse(response.substr(at + 4), nullptr, false);
  if (j.is_discarded() || !j.contains("counters")) return {};
  return j["counters"].get<std::map<std::string, std::int64_t>>();
}

std::int64_t reports_counted(const std::map<std::string, std::int64_t>& c) {
  std::int64_t n = 0;
  for (const char* name :
       {"reports_running", "reports_finished", "reports_failed", "reports_ignored", "reports_unknown"}) {
    n += c.count(name) != 0 ? c.at(name) : 0;
  }
  return n;
}

std::int64_t counter(const std::map<std::string, std::int64_t>& c, const std::string& name) {
  return c.count(name) != 0 ? c.at(name) : -1;
}

}  // namespace

TEST_CASE("finished jobs end finished, failed ones are redelivered, then dead-lettered after their attempts",
          "[e2e][lifecycle]") {
  World w("lc-reports");
  w.settings["DELAYD_SCHEDULER_BUSINESS"] = "orders.keep_payload=true,orders.max_process_attempts=3";
  w.settings["DELAYD_SCHEDULER_PROCESS_RETRY_BASE_MS"] = "200";
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  Collector out(w, {w.ready_topic("orders"), w.dlq_topic});
  REQUIRE(out.wait_assigned());

  constexpr int kHalf = 10;
  std::vector<std::string> good, bad;
  const std::int64_t t0 = now_ms() + 500;
  for (int i = 0; i < kHalf; ++i) {
    good.push_back("good-" + std::to_string(i));
    bad.push_back("bad-" + std::to_string(i));
  }
  for (int i = 0; i < kHalf; ++i) {
    for (const auto& id : {good[i], bad[i]}) {
      Job j = job_at(id, t0 + 20 * i, "payload of " + id, id);
      j.extra = {{"trace-id", "t-" + id}};
      pub.send(j);
    }
  }
  pub.flush();

  // Even bad jobs ask for their retry with retry-after-ms; odd ones get the backoff
  // (200 ms * 2^(attempt-1), equal jitter: at least half of it).
  auto retry_after = [](const std::string& id) { return std::stoi(id.substr(4)) % 2 == 0; };
  std::map<std::string, std::map<std::int64_t, std::int64_t>> failed_sent;  // id -> attempt -> ms
  std::size_t handled = 0;
  // As a consumer does: the reports go out as soon as the ready record is read.
  auto on_new = [&](const Record& r) {
    if (r.topic != w.ready_topic("orders")) return;
    const std::string id = header(r, "job-id").value_or("");
    const std::int64_t attempt = number(header(r, "attempt"));
    // Each report echoes its delivery's attempt, as README asks: the backoff doubles with it.
    pub.send_report(id, "running", std::nullopt, std::nullopt, attempt);
    if (id.starts_with("good-")) {
      pub.send_report(id, "finished", std::nullopt, std::nullopt, attempt);
    } else {
      failed_sent[id][attempt] = now_ms();
      pub.send_report(id, "failed", "boom " + std::to_string(attempt),
                      retry_after(id) ? std::optional<std::int64_t>(300) : std::nullopt, attempt);
    }
    pub.flush();
  };
  auto done = [&] {
    if (out.records().size() < 3 * kHalf + kHalf + kHalf) return false;  // ready 10 + 30, dead 10
    const auto good_states = redis.states(good);
    const auto bad_states = redis.states(bad);
    return std::count(good_states.begin(), good_states.end(), "finished") == kHalf &&
           std::count(bad_states.begin(), bad_states.end(), "failed") == kHalf;
  };
  const bool complete = react_until(out, handled, on_new, done, std::chrono::seconds(20));
  linger(out, std::chrono::milliseconds(1000));  // a 4th attempt would show up by now
  CHECK(delayd.stop() == 0);
  INFO("states: " << states_of(redis, good) << ", " << states_of(redis, bad));
  CHECK(complete);

  for (const auto& id : good) {
    INFO(id);
    const auto ready = of(out.records(), w.ready_topic("orders"), id);
    REQUIRE(ready.size() == 1);
    CHECK(header(*ready[0], "attempt") == "1");
    CHECK(of(out.records(), w.dlq_topic, id).empty());
    CHECK(redis.field(id, "state") == "finished");
    const std::int64_t running_at = number(redis.field(id, "running_at"));
    const std::int64_t finished_at = number(redis.field(id, "finished_at"));
    CHECK(running_at >= ready[0]->timestamp_ms);
    CHECK(finished_at >= running_at);
    CHECK_FALSE(redis.field(id, "value").has_value());  // the payload goes once finished
  }
  for (const auto& id : bad) {
    INFO(id << ", history:\n" << joined(redis.history(id)));
    const auto ready = of(out.records(), w.ready_topic("orders"), id);
    CHECK(numbers(ready, "attempt") == std::vector<std::int64_t>{1, 2, 3});
    for (const auto* r : ready) {
      CHECK(r->value == "payload of " + id);  // keep_payload: every redelivery has it
      CHECK(r->key == id);
      CHECK(header(*r, "trace-id") == "t-" + id);
      CHECK(header(*r, "deliver-at") == std::to_string(t0 + 20 * std::stoi(id.substr(4))));
    }
    for (std::size_t k = 1; k < ready.size(); ++k) {
      const std::int64_t sent = failed_sent[id][static_cast<std::int64_t>(k)];
      const std::int64_t min_wait = retry_after(id) ? 300 : 100 << (k - 1);
      INFO("attempt " << k + 1 << " came " << ready[k]->timestamp_ms - sent << " ms after the failed report");
      CHECK(ready[k]->timestamp_ms >= sent + min_wait);
    }
    const auto dead = of(out.records(), w.dlq_topic, id);
    REQUIRE(dead.size() == 1);
    CHECK(header(*dead[0], "attempt") == "3");
    CHECK(header(*dead[0], "business") == "orders");
    CHECK(header(*dead[0], "error") == "reported failed after 3 attempts: boom 3");
    CHECK(dead[0]->value == "payload of " + id);
    CHECK(dead[0]->key == id);
    CHECK(redis.field(id, "state") == "failed");
    CHECK_THAT(redis.field(id, "error").value_or(""), Catch::Contains("reported failed after 3 attempts"));
    // A failed report that schedules a retry, for attempts 1 and 2; the end, for attempt 3.
    const auto history = redis.history(id);
    CHECK(events(history, "failed", 1) == 1);
    CHECK(events(history, "failed", 2) == 1);
    CHECK(events(history, "dead", 3) == 1);
    CHECK(events(history, "dead") == 1);
  }
}

TEST_CASE("reports out of order, twice, for unknown ids and in a storm of 100 000 are counted and stop nothing",
          "[e2e][lifecycle]") {
  World w("lc-storm");
  const std::uint16_t admin = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  Collector out(w, {w.ready_topic("orders"), w.dlq_topic});
  REQUIRE(out.wait_assigned());

  const std::int64_t t0 = now_ms() + 300;
  pub.send(job_at("a", t0, "va", "a"));
  pub.send(job_at("c", t0, "vc", "c"));
  const std::int64_t b_at = t0 + 5000;  // still delay while it gets a report; due during the storm
  pub.send(job_at("b", b_at, "vb", "b"));
  pub.flush();
  // Expected counts of each outcome, as the contract defines them.
  std::int64_t applied_running = 0, applied_finished = 0, ignored = 0, unknown = 0;

  // b must be known before its report, or the report would be for an unknown id.
  REQUIRE(
      out.collect_until([&](const auto&) { return redis.field("b", "state") == "delay"; }, std::chrono::seconds(30)));
  pub.send_report("b", "finished");  // for a job still delay
  ++ignored;
  REQUIRE(out.collect_until(
      [&](const Records& recs) {
        return of(recs, w.ready_topic("orders"), "a").size() == 1 && of(recs, w.ready_topic("orders"), "c").size() == 1;
      },
      std::chrono::seconds(30)));
  // Settled as ready first, so that each report below has one outcome.
  REQUIRE(out.collect_until(
      [&](const auto&) {
        return redis.states({"a", "c"}) == std::vector<std::string>{"ready", "ready"};
      },
      std::chrono::seconds(30)));
  // Each job's reports share a key, so they are applied in this order.
  pub.send_report("a", "finished");
  pub.send_report("a", "finished");  // twice
  pub.send_report("a", "running");   // after finished
  pub.send_report("a", "failed", "too late");
  applied_finished += 1;
  ignored += 3;
  pub.send_report("c", "running");
  pub.send_report("c", "running");  // a heartbeat
  pub.send_report("c", "finished");
  pub.send_report("c", "running");  // after finished
  applied_running += 2;
  applied_finished += 1;
  ignored += 1;
  for (int i = 0; i < 5; ++i) pub.send_report("ghost-" + std::to_string(i), "finished");
  unknown += 5;
  // Invalid status records: dead-lettered, none of the report counters.
  pub.send_report("", "finished");
  pub.send_report("d", "");
  pub.send_report("e", "bogus");
  pub.flush();

  // The storm: mostly unknown ids (each many times over), and duplicates for the finished jobs.
  constexpr int kStorm = 100000;
  const auto storm_start = std::chrono::steady_clock::now();
  const char* statuses[] = {"running", "finished", "failed"};
  for (int i = 0; i < kStorm; ++i) {
    const std::string status = statuses[i % 3];
    if (i % 5 == 4) {
      pub.send_report(i % 2 ? "a" : "c", status, status == "failed" ? std::optional<std::string>("x") : std::nullopt);
      ++ignored;
    } else {
      pub.send_report("storm-" + std::to_string(i % 20000), status);
      ++unknown;
    }
  }
  pub.flush();
  const auto published = std::chrono::steady_clock::now();
  // A job published right behind the storm is still delivered, on time or close to it.
  const std::int64_t after_at = now_ms() + 500;
  pub.send(job_at("after-storm", after_at, "v", "after-storm"));
  pub.flush();
  REQUIRE(out.collect_until(
      [&](const Records& recs) {
        return of(recs, w.ready_topic("orders"), "after-storm").size() == 1 &&
               of(recs, w.ready_topic("orders"), "b").size() == 1;
      },
      std::chrono::seconds(90)));
  const std::int64_t after_late = of(out.records(), w.ready_topic("orders"), "after-storm")[0]->timestamp_ms - after_at;

  const std::int64_t expected = applied_running + applied_finished + ignored + unknown;
  std::map<std::string, std::int64_t> counters;
  const bool all_counted = out.collect_until(
      [&](const auto&) {
        counters = loop_counters(admin);
        return reports_counted(counters) >= expected;
      },
      std::chrono::seconds(120));
  const auto counted = std::chrono::steady_clock::now();
  std::cout << "report storm: " << kStorm << " published in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(published - storm_start).count()
            << " ms, all counted " << std::chrono::duration_cast<std::chrono::milliseconds>(counted - published).count()
            << " ms later; a job due behind it came " << after_late << " ms after its time\n";
  CHECK(after_late < 15000);  // held up by the storm for a while at most, not stopped
  REQUIRE(out.collect_until([](const Records& recs) { return recs.size() >= 2 + 2 + 3; }, std::chrono::seconds(30)));
  linger(out, std::chrono::milliseconds(500));
  CHECK(delayd.running());
  CHECK(delayd.stop() == 0);

  INFO(nlohmann::json(counters).dump());
  CHECK(all_counted);
  CHECK(reports_counted(counters) == expected);
  CHECK(counter(counters, "reports_running") == applied_running);
  CHECK(counter(counters, "reports_finished") == applied_finished);
  CHECK(counter(counters, "reports_failed") == 0);
  CHECK(counter(counters, "reports_ignored") == ignored);
  CHECK(counter(counters, "reports_unknown") == unknown);

  CHECK(redis.field("a", "state") == "finished");
  CHECK_FALSE(redis.field("a", "running_at").has_value());  // the running after finished changed nothing
  CHECK(redis.field("c", "state") == "finished");
  CHECK(redis.field("c", "running_at").has_value());
  // The report while b was delay changed nothing: b came once, not early, and is ready.
  const auto b = of(out.records(), w.ready_topic("orders"), "b");
  REQUIRE(b.size() == 1);
  CHECK(b[0]->timestamp_ms >= b_at);
  CHECK(header(*b[0], "attempt") == "1");
  CHECK(redis.field("b", "state") == "ready");
  CHECK_FALSE(redis.field("b", "finished_at").has_value());
  for (const char* id : {"a", "c", "after-storm"}) CHECK(of(out.records(), w.ready_topic("orders"), id).size() == 1);
  CHECK_FALSE(redis.field("ghost-0", "state").has_value());  // an unknown id creates no job

  // The three invalid status records, each with its reason.
  std::vector<const Record*> dead;
  for (const auto& r : out.records()) {
    if (r.topic == w.dlq_topic) dead.push_back(&r);
  }
  REQUIRE(dead.size() == 3);
  for (const auto* r : dead) {
    INFO("error header: " << header(*r, "error").value_or("<none>"));
    CHECK(header(*r, "error").has_value());
    CHECK(header(*r, "source-topic") == w.status_topic);
  }
}

TEST_CASE("a job nobody reports on is redelivered after ack_timeout_ms, a job reported running is not",
          "[e2e][lifecycle]") {
  World w("lc-ack");
  w.settings["DELAYD_SCHEDULER_BUSINESS"] =
      "orders.ack_timeout_ms=1500,mail.ack_timeout_ms=1000,mail.max_process_attempts=2";
  w.create_topics({"orders", "mail"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders, w.ready_topic("mail"), w.dlq_topic});
  REQUIRE(out.wait_assigned());

  const std::int64_t t0 = now_ms() + 300;
  pub.send(job_at("silent", t0, "vs", "silent"));
  pub.send(job_at("busy", t0, "vb", "busy"));
  pub.send(job_at("hopeless", t0, "vh", "hopeless", "mail"));
  pub.flush();

  // busy: running at once, then a heartbeat every 500 ms for twice the timeout, then finished.
  std::int64_t busy_since = -1, next_beat = 0, busy_finished = -1;
  bool silent_closed = false;
  std::size_t handled = 0;
  auto on_new = [&](const Record& r) {
    const std::string id = header(r, "job-id").value_or("");
    if (r.topic != orders) return;
    if (id == "busy" && busy_since < 0) {
      CHECK(settled(redis, "busy"));
      busy_since = now_ms();
      next_beat = busy_since + 500;
      pub.send_report("busy", "running");
      pub.flush();
    }
    if (id == "silent" && header(r, "attempt") == "2" && !silent_closed) {
      silent_closed = true;
      CHECK(settled(redis, "silent"));
      pub.send_report("silent", "running");
      pub.send_report("silent", "finished");
      pub.flush();
    }
  };
  auto done = [&] {
    const std::int64_t now = now_ms();
    if (busy_since >= 0 && busy_finished < 0) {
      if (now >= busy_since + 3000) {
        pub.send_report("busy", "finished");
        pub.flush();
        busy_finished = now;
      } else if (now >= next_beat) {
        pub.send_report("busy", "running");
        pub.flush();
        next_beat += 500;
      }
    }
    return busy_finished >= 0 && now >= busy_finished + 1000 && silent_closed &&
           !of(out.records(), w.dlq_topic, "hopeless").empty() &&
           redis.states({"silent", "busy", "hopeless"}) == std::vector<std::string>{"finished", "finished", "failed"};
  };
  const bool complete = react_until(out, handled, on_new, done, std::chrono::seconds(30));
  linger(out, std::chrono::milliseconds(500));
  CHECK(delayd.stop() == 0);
  INFO("states: " << states_of(redis, {"silent", "busy", "hopeless"}));
  CHECK(complete);

  {
    INFO("silent's history:\n" << joined(redis.history("silent")));
    const auto silent = of(out.records(), orders, "silent");
    REQUIRE(numbers(silent, "attempt") == std::vector<std::int64_t>{1, 2});
    const std::int64_t gap = silent[1]->timestamp_ms - silent[0]->timestamp_ms;
    INFO("redelivered " << gap << " ms after the first delivery");
    CHECK(gap >= 1500);
    CHECK(gap <= 1500 + 2500);
    CHECK(silent[1]->value == "vs");
    CHECK(redis.field("silent", "redelivered") == "1");
    CHECK(events(redis.history("silent"), "redelivered") == 1);
  }
  {
    const auto busy = of(out.records(), orders, "busy");
    INFO("busy's history:\n" << joined(redis.history("busy")));
    CHECK(numbers(busy, "attempt") == std::vector<std::int64_t>{1});
    CHECK(redis.field("busy", "finished_at").has_value());
  }
  {
    INFO("hopeless's history:\n" << joined(redis.history("hopeless")));
    CHECK(numbers(of(out.records(), w.ready_topic("mail"), "hopeless"), "attempt") == std::vector<std::int64_t>{1, 2});
    const auto dead = of(out.records(), w.dlq_topic, "hopeless");
    REQUIRE(dead.size() == 1);
    CHECK_THAT(header(*dead[0], "error").value_or(""),
               Catch::StartsWith("no report within") && Catch::EndsWith("after 2 deliveries"));
    CHECK(dead[0]->value == "vh");
    CHECK_THAT(redis.field("hopeless", "error").value_or(""),
               Catch::StartsWith("no report within") && Catch::EndsWith("after 2 deliveries"));
  }
}

TEST_CASE("a reschedule moves a job earlier, later or into the past, across the load window, never early",
          "[e2e][lifecycle]") {
  World w("lc-resched");
  w.settings["DELAYD_SCHEDULER_LOAD_WINDOW_MS"] = "2000";
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders});
  REQUIRE(out.wait_assigned());

  // The load window is 2 s: "earlier" waits in Redis only until its reschedule brings it into
  // the window; "later" is in the wheel when its reschedule takes it out of the window.
  const std::int64_t t0 = now_ms();
  const std::int64_t earlier_old = t0 + 8000, earlier_new = t0 + 2500;
  const std::int64_t later_old = t0 + 2500;
  const std::int64_t past_old = t0 + 6000, past_new = t0 - 60000;
  pub.send(job_at("earlier", earlier_old, "v", "earlier"));
  pub.send(job_at("later", later_old, "v", "later"));
  pub.send(job_at("past", past_old, "v", "past"));
  pub.flush();
  REQUIRE(out.collect_until(
      [&](const auto&) {
        return redis.states({"earlier", "later", "past"}) == std::vector<std::string>{"delay", "delay", "delay"};
      },
      std::chrono::seconds(10)));
  const std::int64_t sent_from = now_ms();
  std::cout << "reschedule test: the jobs were in Redis " << sent_from - t0 << " ms after they were published\n";
  pub.send_reschedule("earlier", {{"deliver-at", delayd::contract::format_rfc3339_ms(earlier_new)}});
  pub.send_reschedule("later", {{"delay-ms", "3000"}});  // from the reschedule record's timestamp
  pub.send_reschedule("past", {{"deliver-at", std::to_string(past_new)}});
  pub.send_reschedule("nobody", {{"delay-ms", "100"}});  // an unknown job: nothing happens
  pub.flush();
  const std::int64_t sent_to = now_ms();
  // Otherwise "later" may be claimed before its reschedule is read: a late reschedule.
  REQUIRE(sent_to < later_old - 500);

  std::int64_t later_new = -1;
  REQUIRE(out.collect_until(
      [&](const auto&) {
        later_new = number(redis.field("later", "deliver_at"));
        return later_new > later_old && number(redis.field("earlier", "deliver_at")) == earlier_new;
      },
      std::chrono::seconds(10)));
  CHECK(later_new >= sent_from + 3000);
  CHECK(later_new <= sent_to + 3000);

  REQUIRE(out.collect_until([](const Records& recs) { return recs.size() >= 3; }, std::chrono::seconds(30)));
  // "past" is final now: a reschedule of it is ignored.
  pub.send_reschedule("past", {{"delay-ms", "200"}});
  pub.flush();
  // Past both old times, so that a stale timer would have fired.
  out.collect_until([&](const auto&) { return now_ms() >= earlier_old + 1000; }, std::chrono::seconds(30));
  CHECK(delayd.stop() == 0);

  const auto earlier = of(out.records(), orders, "earlier");
  REQUIRE(earlier.size() == 1);
  CHECK(earlier[0]->timestamp_ms >= earlier_new);
  CHECK(earlier[0]->timestamp_ms < earlier_old);
  CHECK(header(*earlier[0], "deliver-at") == std::to_string(earlier_new));
  const auto later = of(out.records(), orders, "later");
  REQUIRE(later.size() == 1);
  CHECK(later[0]->timestamp_ms >= later_new);
  CHECK(header(*later[0], "deliver-at") == std::to_string(later_new));
  const auto past = of(out.records(), orders, "past");
  REQUIRE(past.size() == 1);
  INFO("past came " << past[0]->timestamp_ms - sent_to << " ms after its reschedule was published");
  CHECK(past[0]->timestamp_ms < past_old - 3000);  // at once, not at its old time
  CHECK(header(*past[0], "deliver-at") == std::to_string(past_new));
  CHECK(out.records().size() == 3);  // nothing for "nobody", nothing twice

  CHECK(redis.states({"earlier", "later", "past"}) == std::vector<std::string>{"ready", "ready", "ready"});
  CHECK(number(redis.field("earlier", "deliver_at")) == earlier_new);
  CHECK(number(redis.field("past", "deliver_at")) == past_new);
  for (const char* id : {"earlier", "later", "past"}) {
    INFO(id << "'s history:\n" << joined(redis.history(id)));
    CHECK(events(redis.history(id), "rescheduled") == 1);
  }
  CHECK_FALSE(redis.field("nobody", "state").has_value());
}

TEST_CASE("a repeating job fires on its grid with repeat numbers, and a cancel between occurrences ends the series",
          "[e2e][lifecycle]") {
  World w("lc-repeat");
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders, w.dlq_topic});
  REQUIRE(out.wait_assigned());

  const std::int64_t t0 = now_ms() + 1000;
  Job four = job_at("four", t0, "v4", "four");
  four.extra = {{"repeat-every-ms", "500"}, {"repeat-count", "4"}};
  // Two series without end, both cancelled after their 2nd occurrence: "endless" as soon as the
  // consumer reads it, "endless-waiting" once Redis shows it waiting for the 3rd.
  const std::vector<std::string> endless_ids{"endless", "endless-waiting"};
  for (const auto& id : endless_ids) {
    Job endless = job_at(id, t0, "ve", id);
    endless.extra = {{"repeat-every-ms", "1000"}};
    pub.send(endless);
  }
  Job no_every = job_at("no-every", t0, "vn", "no-every");
  no_every.extra = {{"repeat-count", "3"}};
  pub.send(four);
  pub.send(no_every);
  pub.flush();

  std::map<std::string, std::int64_t> cancelled_at;
  std::size_t handled = 0;
  auto on_new = [&](const Record& r) {
    const std::string id = header(r, "job-id").value_or("");
    if (r.topic != orders) return;
    if (id == "four" && header(r, "repeat") == "1") {
      pub.send_report("four", "finished");  // reports on a repeating job change nothing
      pub.flush();
    }
    if (id == "endless-waiting" && header(r, "repeat") == "2") {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
      while ((redis.field(id, "repeat") != "3" || redis.field(id, "firing_at")) &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      CHECK(redis.field(id, "state") == "delay");
      CHECK(redis.field(id, "repeat") == "3");
    }
    if (id.starts_with("endless") && header(r, "repeat") == "2") {
      pub.send_cancel(id);
      pub.flush();
      cancelled_at[id] = now_ms();
    }
  };
  auto done = [&] {
    return of(out.records(), orders, "four").size() >= 4 && cancelled_at.size() == 2 &&
           now_ms() >= std::max(cancelled_at["endless"], cancelled_at["endless-waiting"]) + 2500 &&
           !of(out.records(), w.dlq_topic, "no-every").empty();
  };
  const bool complete = react_until(out, handled, on_new, done, std::chrono::seconds(15));
  linger(out, std::chrono::milliseconds(500));
  CHECK(delayd.stop() == 0);
  CHECK(complete);

  const auto fours = of(out.records(), orders, "four");
  REQUIRE(fours.size() == 4);
  for (std::size_t k = 0; k < fours.size(); ++k) {
    const std::int64_t at = t0 + static_cast<std::int64_t>(k) * 500;
    INFO("occurrence " << k + 1 << " came " << fours[k]->timestamp_ms - at << " ms after its time");
    CHECK(header(*fours[k], "repeat") == std::to_string(k + 1));
    CHECK(header(*fours[k], "deliver-at") == std::to_string(at));
    CHECK(fours[k]->timestamp_ms >= at);
    CHECK(header(*fours[k], "attempt") == "1");
    CHECK(fours[k]->value == "v4");
  }
  CHECK(redis.field("four", "state") == "ready");
  CHECK(redis.field("four", "repeat") == "4");

  for (const auto& id : endless_ids) {
    const auto endlesses = of(out.records(), orders, id);
    INFO(id << "'s history:\n" << joined(redis.history(id)));
    CHECK(endlesses.size() == 2);
    for (std::size_t k = 0; k < endlesses.size(); ++k) {
      const std::int64_t at = t0 + static_cast<std::int64_t>(k) * 1000;
      CHECK(header(*endlesses[k], "repeat") == std::to_string(k + 1));
      CHECK(header(*endlesses[k], "deliver-at") == std::to_string(at));
      CHECK(endlesses[k]->timestamp_ms >= at);
    }
    CHECK(redis.field(id, "state") == "cancelled");
  }

  CHECK(of(out.records(), orders, "no-every").empty());
  const auto dead = of(out.records(), w.dlq_topic, "no-every");
  REQUIRE(dead.size() == 1);
  CHECK_THAT(header(*dead[0], "error").value_or(""), Catch::Contains("repeat-every-ms"));
}

TEST_CASE("reports, redelivery, repeats and reschedules all survive a kill -9 of delayd", "[e2e][lifecycle][crash]") {
  World w("lc-crash");
  w.settings["DELAYD_SCHEDULER_BUSINESS"] =
      "orders.ack_timeout_ms=1500,mail.keep_payload=true,mail.max_process_attempts=3";
  w.settings["DELAYD_SCHEDULER_PROCESS_RETRY_BASE_MS"] = "200";
  w.create_topics({"orders", "mail"});
  const std::string orders = w.ready_topic("orders"), mail = w.ready_topic("mail");
  Collector out(w, {orders, mail, w.dlq_topic});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  JobReader redis(w);

  auto first = std::make_unique<DelaydProcess>(w);
  first->start();
  const std::int64_t t0 = now_ms() + 500;
  constexpr int kRepeats = 18;
  const std::int64_t resched_new = t0 + 13000;
  pub.send(job_at("fail-retry", t0, "v1", "fail-retry", "mail"));  // failed before the crash, retry after it
  pub.send(job_at("fail-down", t0, "v2", "fail-down", "mail"));    // failed while delayd is down
  pub.send(job_at("fin-down", t0, "v3", "fin-down", "mail"));      // finished while delayd is down
  pub.send(job_at("silent", t0, "v4", "silent"));                  // nobody reports: ack timeout
  Job repeater = job_at("repeater", t0, "v5", "repeater", "mail");
  repeater.extra = {{"repeat-every-ms", "1000"}, {"repeat-count", std::to_string(kRepeats)}};
  pub.send(repeater);
  pub.send(job_at("resched", t0 + 4000, "v6", "resched", "mail"));  // would be due while delayd is down
  pub.flush();
  REQUIRE(out.collect_until([&](const auto&) { return redis.field("resched", "state") == "delay"; },
                            std::chrono::seconds(10)));
  pub.send_reschedule("resched", {{"deliver-at", std::to_string(resched_new)}});
  pub.flush();

  std::int64_t fail_retry_sent = -1;
  std::set<std::string> closed;  // jobs reported finished after their redelivery
  std::size_t handled = 0;
  auto on_new = [&](const Record& r) {
    const std::string id = header(r, "job-id").value_or("");
    const std::int64_t attempt = number(header(r, "attempt"));
    if (r.topic == w.dlq_topic) return;
    // Every report echoes its delivery's attempt, as README asks of consumers: the restarted
    // delayd may read the status topic again from before the crash (offsets not committed yet)
    // after it has delivered the next attempt, and only the echo tells an old report apart.
    if (id == "fail-retry" && attempt == 1 && fail_retry_sent < 0) {
      CHECK(settled(redis, id));
      pub.send_report(id, "running", std::nullopt, std::nullopt, attempt);
      pub.send_report(id, "failed", "try later", 2000, attempt);
      fail_retry_sent = now_ms();
      pub.flush();
    } else if ((id == "fail-retry" || id == "fail-down" || id == "silent") && attempt >= 2 && !closed.count(id)) {
      closed.insert(id);
      CHECK(settled(redis, id));
      pub.send_report(id, "running", std::nullopt, std::nullopt, attempt);
      pub.send_report(id, "finished", std::nullopt, std::nullopt, attempt);
      pub.flush();
    }
  };
  // Crash once the first deliveries are settled, the failed report is applied, and the reschedule
  // is in Redis.
  REQUIRE(react_until(
      out, handled, on_new,
      [&] {
        return redis.states({"fail-retry", "fail-down", "fin-down"}) ==
                   std::vector<std::string>{"delay", "ready", "ready"} &&
               !of(out.records(), orders, "silent").empty() && !of(out.records(), mail, "repeater").empty() &&
               number(redis.field("resched", "deliver_at")) == resched_new;
      },
      std::chrono::seconds(30)));
  first->kill9();
  const std::int64_t killed_at = now_ms();
  first.reset();
  // Reports published while no delayd runs: they wait in the status topic.
  pub.send_report("fin-down", "running", std::nullopt, std::nullopt, 1);
  pub.send_report("fin-down", "finished", std::nullopt, std::nullopt, 1);
  pub.send_report("fail-down", "running", std::nullopt, std::nullopt, 1);
  pub.send_report("fail-down", "failed", "down", std::nullopt, 1);
  pub.flush();

  DelaydProcess second(w);
  second.start();
  const std::int64_t restarted_at = now_ms();
  std::cout << "lifecycle crash: killed at t0 + " << killed_at - t0 << " ms, running again at t0 + "
            << restarted_at - t0 << " ms\n";
  auto done = [&] {
    bool last_repeat = false;
    for (const auto* r : of(out.records(), mail, "repeater")) last_repeat |= number(header(*r, "repeat")) == kRepeats;
    return last_repeat && !of(out.records(), mail, "resched").empty() &&
           redis.states({"fail-retry", "fail-down", "fin-down", "silent"}) ==
               std::vector<std::string>{"finished", "finished", "finished", "finished"};
  };
  const bool complete = react_until(out, handled, on_new, done, std::chrono::seconds(60));
  linger(out, std::chrono::milliseconds(1200));
  CHECK(second.stop() == 0);
  INFO("states: " << states_of(redis, {"fail-retry", "fail-down", "fin-down", "silent", "repeater", "resched"}));
  CHECK(complete);

  for (const auto& id : {"fail-retry", "fail-down", "fin-down", "silent", "repeater", "resched"}) {
    CHECK(of(out.records(), w.dlq_topic, id).empty());
  }
  {
    const auto recs = of(out.records(), mail, "fail-retry");
    INFO("fail-retry's history:\n" << joined(redis.history("fail-retry")));
    REQUIRE(numbers(recs, "attempt") == std::vector<std::int64_t>{1, 2});
    CHECK(recs[1]->timestamp_ms >= fail_retry_sent + 2000);
    CHECK(recs[1]->value == "v1");
  }
  {
    INFO("fail-down's history:\n" << joined(redis.history("fail-down")));
    CHECK(numbers(of(out.records(), mail, "fail-down"), "attempt") == std::vector<std::int64_t>{1, 2});
  }
  {
    INFO("fin-down's history:\n" << joined(redis.history("fin-down")));
    CHECK(numbers(of(out.records(), mail, "fin-down"), "attempt") == std::vector<std::int64_t>{1});
    CHECK(redis.field("fin-down", "finished_at").has_value());
  }
  {
    // Redelivered at least once (before the crash if it came late, else after the restart), in
    // order, and never again once reported finished.
    const auto got = numbers(of(out.records(), orders, "silent"), "attempt");
    INFO("silent's history:\n" << joined(redis.history("silent")));
    REQUIRE(got.size() >= 2);
    for (std::size_t k = 0; k < got.size(); ++k) CHECK(got[k] == static_cast<std::int64_t>(k + 1));
  }
  {
    // On the grid, never early, numbered by it. Of the occurrences due while delayd was down, only
    // the latest instant passed by the restart comes, late (repeat-catchup latest, the default):
    // the one pending at the kill is skipped, in the history, with those after it.
    const auto recs = of(out.records(), mail, "repeater");
    std::set<std::int64_t> seen;
    std::int64_t last = 0;
    const std::int64_t first_after_kill = (killed_at - t0) / 1000 + 2;  // its number
    int late_after_restart = 0;
    for (const auto* r : recs) {
      const std::int64_t k = number(header(*r, "repeat"));
      const std::int64_t at = t0 + (k - 1) * 1000;
      INFO("occurrence " << k << " came " << r->timestamp_ms - at << " ms after its time");
      CHECK(k >= last);
      CHECK(k <= kRepeats);
      CHECK(header(*r, "deliver-at") == std::to_string(at));
      CHECK(r->timestamp_ms >= at);
      const bool while_down = at > killed_at + 50 && at <= restarted_at - 500;
      if (while_down) {
        ++late_after_restart;
        CHECK(k > first_after_kill);  // not the one pending at the kill: a later one
      } else if (r->timestamp_ms - at > 1500) {
        CHECK(at <= killed_at + 50);  // claimed before the kill, delivered again after it
      }
      last = k;
      seen.insert(k);
    }
    CHECK(late_after_restart <= 1);
    CHECK(events(redis.history("repeater"), "skipped") == 1);
    std::cout << "lifecycle crash: repeater occurrences delivered:";
    for (const auto* r : recs) {
      const std::int64_t k = number(header(*r, "repeat"));
      std::cout << " " << k << " (+" << r->timestamp_ms - (t0 + (k - 1) * 1000) << " ms)";
    }
    std::cout << "; silent delivered " << of(out.records(), orders, "silent").size() << " times\n";
    // Every occurrence due after the restart (and its catch-up, which the first deliveries of a
    // fresh producer may delay past the next instant) came.
    for (std::int64_t k = 1; k <= kRepeats; ++k) {
      if (t0 + (k - 1) * 1000 > restarted_at + 1500) CHECK(seen.count(k) == 1);
    }
    CHECK(seen.count(1) == 1);
    CHECK(redis.field("repeater", "state") == "ready");
  }
  {
    const auto recs = of(out.records(), mail, "resched");
    REQUIRE(recs.size() == 1);
    CHECK(recs[0]->timestamp_ms >= resched_new);
    CHECK(header(*recs[0], "deliver-at") == std::to_string(resched_new));
    CHECK(redis.field("resched", "state") == "ready");
  }
}
