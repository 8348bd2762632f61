// The console's job API of the real delayd executable against the local stack (label e2e; needs
// KAFKA_BOOTSTRAP and REDIS_URL): GET /jobs walks and filters, every bad input refused with the
// field named, and the actions on one job (run-now, reschedule, retry) checked through Kafka
// (what the ready topic receives, and when) and Redis (the job's record), not through the API.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "console_client.hpp"
#include "e2e/harness.hpp"

using namespace delayd::e2e;
using delayd::connectors::Record;
using Json = nlohmann::json;

namespace {

const std::string kToken = "console-test-token";
const std::string kReadToken = "console-read-token";

using console::Answer;
using console::wait_states;

Answer call(std::uint16_t port, const std::string& method, const std::string& path, const std::string& body = "",
            const std::string& token = kToken) {
  return console::call(port, method, path, body, token);
}

std::vector<std::string> walk(std::uint16_t port, const std::string& query, int limit) {
  return console::walk(port, "/jobs", query, "jobs", "job_id", limit, kToken);
}

Answer wait_operation(std::uint16_t port, const std::string& id, const std::string& status,
                      std::chrono::milliseconds timeout) {
  return console::wait_operation(port, id, status, timeout, kToken);
}

std::pair<int, std::string> delayctl(const World& w, const std::string& args) {
  return console::delayctl(DELAYCTL_BIN, w, args);
}

std::vector<const Record*> ready_of(const Collector& c, const std::string& topic, const std::string& id) {
  std::vector<const Record*> out;
  for (const Record& r : c.records()) {
    if (r.topic == topic && header(r, "job-id") == id) out.push_back(&r);
  }
  return out;
}

}  // namespace

TEST_CASE("the console lists, filters and acts on jobs, and every bad input names its field", "[e2e][admin][console]") {
  World w("console");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.settings["DELAYD_ADMIN_TOKEN"] = kToken;
  w.settings["DELAYD_ADMIN_READ_TOKEN"] = kReadToken;
  w.settings["DELAYD_SCHEDULER_BUSINESS"] = "orders.keep_payload=true,orders.max_process_attempts=1";
  w.create_topics({"orders", "mail"}, 2);
  DelaydProcess delayd(w);
  delayd.set_die_with_test(true);
  delayd.start();
  REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 "));
  Publisher pub(w);
  JobReader redis(w);
  Collector out(w, {w.ready_topic("orders"), w.ready_topic("mail"), w.dlq_topic});
  REQUIRE(out.wait_assigned());

  // 12 waiting jobs in two businesses, due an hour on, 1 s apart (keys spread them over the
  // ingest topic's partitions), and one due at once for the retry below.
  const std::int64_t later = now_ms() + 3'600'000;
  std::vector<std::string> orders, all;
  for (int i = 0; i < 12; ++i) {
    const std::string id = "w-" + std::to_string(i);
    const std::string business = i % 3 == 0 ? "mail" : "orders";
    pub.send(job_at(id, later + 1000 * i, "value of " + id, id, business));
    all.push_back(id);
    if (business == "orders") orders.push_back(id);
  }
  pub.send(job_at("f-1", now_ms(), "value of f-1", "f-1"));
  pub.flush();
  REQUIRE(out.collect_until([&](const auto&) { return !ready_of(out, w.ready_topic("orders"), "f-1").empty(); },
                            std::chrono::seconds(30)));
  REQUIRE(wait_states(redis, all, std::vector<std::string>(all.size(), "delay")));
  REQUIRE(wait_states(redis, {"f-1"}, {"ready"}));

  {  // walks
    // Waiting jobs in deliver_at order across shards, each once, whatever the page size.
    for (int limit : {1, 5, 50}) CHECK(walk(port, "state=delay", limit) == all);
    CHECK(walk(port, "state=delay&business=orders", 3) == orders);
    CHECK(walk(port, "state=delay&id_prefix=w-1", 50) == std::vector<std::string>{"w-1", "w-10", "w-11"});
    const std::string from = std::to_string(later + 2000), to = std::to_string(later + 4000);
    CHECK(walk(port, "state=delay&due_from=" + from + "&due_to=" + to, 50) ==
          std::vector<std::string>{"w-2", "w-3", "w-4"});
    const Answer page = call(port, "GET", "/jobs?state=delay&limit=2");
    REQUIRE(page.status == 200);
    const Json& first = page.body["jobs"][0];
    CHECK(first["job_id"] == "w-0");
    CHECK(first["business"] == "mail");
    CHECK(first["state"] == "delay");
    CHECK(first["deliver_at"] == later);
    CHECK(first["attempt"] == 0);
    CHECK(first["shard"].get<std::string>().starts_with(w.ingest_topic + ":"));
    CHECK(page.body["next"].is_string());

    // delayctl jobs walks the same way: one JSON object per line with --all.
    const auto [status, text] = delayctl(w, "jobs --state delay --business orders --limit 2 --all");
    CHECK(status == 0);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line)["job_id"]);
    CHECK(lines == orders);
    CHECK(delayctl(w, "jobs --state waiting").first == 2);
  }

  {  // the read token reads everything and changes nothing
    const Answer page = call(port, "GET", "/jobs?state=delay&limit=3", "", kReadToken);
    CHECK(page.status == 200);
    CHECK(page.body["jobs"].size() == 3);
    CHECK(call(port, "GET", "/operations", "", kReadToken).status == 200);
    const std::pair<std::string, std::string> writes[] = {
        {"/jobs/w-1/run-now", ""},
        {"/jobs/w-1/reschedule", R"({"delay_ms": 5})"},
        {"/jobs/f-1/retry", ""},
        {"/jobs/bulk", R"({"action": "cancel", "filter": {}, "dry_run": false})"},
    };
    for (const auto& [path, body] : writes) {
      const Answer a = call(port, "POST", path, body, kReadToken);
      INFO(path << " -> " << a.body.dump());
      CHECK(a.status == 403);
    }
    CHECK(call(port, "DELETE", "/jobs/w-1", "", kReadToken).status == 403);
    CHECK(call(port, "DELETE", "/operations/0123456789abcdef", "", kReadToken).status == 403);
    CHECK(call(port, "GET", "/whoami", "", kReadToken).body["access"] == "read");
    CHECK(redis.states(all) == std::vector<std::string>(all.size(), "delay"));  // nothing changed
    CHECK(call(port, "GET", "/operations").body["operations"].empty());
  }

  {  // bad input
    const std::pair<std::string, std::string> cases[] = {
        {"/jobs?state=waiting", "state"},
        {"/jobs?limit=10000", "limit"},
        {"/jobs?limit=0", "limit"},
        {"/jobs?due_from=yesterday", "due_from"},
        {"/jobs?due_from=2000&due_to=1000", "due_to"},
        {"/jobs?business=no%20spaces", "business"},
        {"/jobs?id_prefix=a%20b", "id_prefix"},
        {"/jobs?sort=asc", "sort"},
        {"/jobs?cursor=1.0000000000000000.1.0", "cursor"},
    };
    for (const auto& [path, field] : cases) {
      const Answer a = call(port, "GET", path);
      INFO(path << " -> " << a.body.dump());
      CHECK(a.status == 400);
      CHECK(a.body["field"] == field);
    }
    // A cursor of one walk given to another is refused.
    const Answer page = call(port, "GET", "/jobs?state=delay&limit=1");
    REQUIRE(page.body["next"].is_string());
    const Answer other =
        call(port, "GET", "/jobs?state=delay&business=orders&cursor=" + page.body["next"].get<std::string>());
    CHECK(other.status == 400);
    CHECK(other.body["field"] == "cursor");
    CHECK(call(port, "POST", "/jobs/w-1/reschedule", "{\"at\": 1}").status == 400);
    CHECK(call(port, "POST", "/jobs/w-1/reschedule", "{\"delay_ms\": -5}").body["field"] == "delay_ms");
    CHECK(call(port, "POST", "/jobs/w-1/reschedule", "{\"delay_ms\": 5, \"deliver_at\": 5}").status == 400);
    CHECK(call(port, "POST", "/jobs/w-1/reschedule", "not json").body["field"] == "body");
    CHECK(call(port, "GET", "/jobs/w-1/run-now").status == 405);
    for (const std::string bad_id : {"/jobs/a%20b", "/jobs/a%00b/retry", "/jobs/%C3%A9/run-now"}) {
      const Answer a = call(port, bad_id.ends_with("b") ? "GET" : "POST", bad_id);
      INFO(bad_id << " -> " << a.body.dump());
      CHECK(a.status == 400);
      CHECK(a.body["field"] == "id");
    }
    CHECK(call(port, "POST", "/jobs/nobody/run-now").status == 404);
    CHECK(redis.states({"w-1"}) == std::vector<std::string>{"delay"});  // nothing moved
  }

  {  // run-now and reschedule deliver through Kafka, never before the new time
    const std::int64_t asked = now_ms();
    const Answer now = call(port, "POST", "/jobs/w-1/run-now");
    INFO(now.body.dump());
    REQUIRE(now.status == 200);
    CHECK(now.body["rescheduled"] == true);
    const std::int64_t at = now_ms() + 1500;
    const Answer moved = call(port, "POST", "/jobs/w-2/reschedule", "{\"deliver_at\": " + std::to_string(at) + "}");
    REQUIRE(moved.status == 200);
    CHECK(moved.body["deliver_at"] == at);
    REQUIRE(out.collect_until(
        [&](const auto&) {
          return !ready_of(out, w.ready_topic("orders"), "w-1").empty() &&
                 !ready_of(out, w.ready_topic("orders"), "w-2").empty();
        },
        std::chrono::seconds(30)));
    const Record* w1 = ready_of(out, w.ready_topic("orders"), "w-1").front();
    const Record* w2 = ready_of(out, w.ready_topic("orders"), "w-2").front();
    CHECK(w1->value == "value of w-1");
    CHECK(w1->timestamp_ms >= asked);
    CHECK(w2->timestamp_ms >= at);  // never early
    CHECK(wait_states(redis, {"w-1", "w-2", "w-3"}, {"ready", "ready", "delay"}));
    // A delivered job is not waiting any more.
    const Answer late = call(port, "POST", "/jobs/w-1/run-now");
    CHECK(late.status == 409);
    CHECK(late.body["state"] == "ready");
  }

  {  // retry delivers a failed job again from its kept payload
    pub.send_report("f-1", "failed", "the consumer broke");
    pub.flush();
    REQUIRE(out.collect_until([&](const auto&) { return redis.field("f-1", "state") == "failed"; },
                              std::chrono::seconds(30)));
    CHECK(redis.field("f-1", "dl").has_value());  // where its dead letter is
    const Answer failed = call(port, "GET", "/jobs?state=failed&error=CONSUMER%20broke");
    REQUIRE(failed.status == 200);
    REQUIRE(failed.body["jobs"].size() == 1);
    CHECK(failed.body["jobs"][0]["job_id"] == "f-1");
    CHECK(call(port, "GET", "/jobs?state=failed&error=nothing%20like%20it").body["jobs"].empty());

    const Answer retried = call(port, "POST", "/jobs/f-1/retry");
    INFO(retried.body.dump());
    REQUIRE(retried.status == 200);
    CHECK(retried.body["source"] == "payload");
    REQUIRE(out.collect_until([&](const auto&) { return ready_of(out, w.ready_topic("orders"), "f-1").size() == 2; },
                              std::chrono::seconds(30)));
    const Record* again = ready_of(out, w.ready_topic("orders"), "f-1").back();
    CHECK(again->value == "value of f-1");
    CHECK(header(*again, "attempt") == "2");
    CHECK(call(port, "POST", "/jobs/f-1/retry").status == 409);  // not failed any more
    CHECK(call(port, "POST", "/jobs/w-3/retry").status == 409);  // waiting
  }
  CHECK(delayd.stop() == 0);
}

TEST_CASE("a bulk cancel counts first, then runs at its rate, survives kill -9 and acts on each job once",
          "[e2e][admin][console]") {
  World w("console-bulk");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.settings["DELAYD_ADMIN_TOKEN"] = kToken;
  w.create_topics({"orders", "mail"}, 2);
  Publisher pub(w);
  JobReader redis(w);
  // 600 waiting jobs of orders (the filter) and 100 of mail (outside it), an hour on.
  constexpr int kOrders = 600;
  const std::int64_t later = now_ms() + 3'600'000;
  std::vector<std::string> orders, mail;
  for (int i = 0; i < kOrders; ++i) {
    orders.push_back("o-" + std::to_string(i));
    pub.send(job_at(orders.back(), later + i, "v", orders.back()));
  }
  for (int i = 0; i < 100; ++i) {
    mail.push_back("m-" + std::to_string(i));
    pub.send(job_at(mail.back(), later + i, "v", mail.back(), "mail"));
  }
  pub.flush();

  std::string id;
  {
    DelaydProcess first(w);
    first.set_die_with_test(true);
    first.start();
    REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 "));
    REQUIRE(wait_states(redis, orders, std::vector<std::string>(orders.size(), "delay")));
    REQUIRE(wait_states(redis, mail, std::vector<std::string>(mail.size(), "delay")));

    // Bad requests change nothing and name their field.
    const std::pair<std::string, std::string> bad[] = {
        {R"({"action": "cancel", "filter": {}})", "dry_run"},
        {R"({"action": "explode", "filter": {}, "dry_run": true})", "action"},
        {R"({"action": "cancel", "filter": {"state": "failed"}, "dry_run": true})", "filter.state"},
        {R"({"action": "retry", "filter": {"state": "delay"}, "dry_run": true})", "filter.state"},
        {R"({"action": "cancel", "filter": {"business": "a b"}, "dry_run": true})", "filter.business"},
        {R"({"action": "cancel", "filter": {"limit": "5"}, "dry_run": true})", "filter.limit"},
        {R"({"action": "cancel", "filter": {}, "dry_run": false, "rate_per_s": 0})", "rate_per_s"},
        {R"({"action": "cancel", "dry_run": true})", "filter"},
        {R"({"action": "cancel", "filter": {}, "dry_run": true, "force": true})", "force"},
    };
    for (const auto& [body, field] : bad) {
      const Answer a = call(port, "POST", "/jobs/bulk", body);
      INFO(body << " -> " << a.body.dump());
      CHECK(a.status == 400);
      CHECK(a.body["field"] == field);
    }
    CHECK(call(port, "GET", "/operations/not-an-id").status == 400);
    CHECK(call(port, "GET", "/operations/0123456789abcdef").status == 404);

    // The dry run counts and changes nothing.
    const Answer dry =
        call(port, "POST", "/jobs/bulk", R"({"action": "cancel", "filter": {"business": "orders"}, "dry_run": true})");
    INFO(dry.body.dump());
    REQUIRE(dry.status == 200);
    CHECK(dry.body["matched"] == kOrders);
    CHECK(dry.body["complete"] == true);
    CHECK(redis.states(orders) == std::vector<std::string>(orders.size(), "delay"));

    // The real run, 100 jobs a second: killed once it is under way.
    const Answer run =
        call(port, "POST", "/jobs/bulk",
             R"({"action": "cancel", "filter": {"business": "orders"}, "dry_run": false, "rate_per_s": 100})");
    INFO(run.body.dump());
    REQUIRE(run.status == 202);
    id = run.body["operation"];
    Answer progress;
    for (int i = 0; i < 100; ++i) {
      progress = call(port, "GET", "/operations/" + id);
      if (progress.body.value("done", 0) >= 150) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    INFO(progress.body.dump());
    CHECK(progress.body["status"] == "running");
    CHECK(progress.body["action"] == "cancel");
    CHECK(progress.body["filter"]["business"] == "orders");
    CHECK(progress.body["done"].get<int>() >= 150);
    CHECK(progress.body["done"].get<int>() < kOrders);
    first.kill9();
  }
  const auto cancelled = [&] {
    const auto states = redis.states(orders);
    return std::count(states.begin(), states.end(), "cancelled");
  };
  const auto half = cancelled();
  CHECK(half > 0);
  CHECK(half < kOrders);

  // Another instance takes the operation over once its lease has run out, and finishes it.
  DelaydProcess second(w);
  second.set_die_with_test(true);
  second.start();
  REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 "));
  const Answer end = wait_operation(port, id, "done", std::chrono::seconds(60));
  INFO(end.body.dump());
  REQUIRE(end.body["status"] == "done");
  CHECK(cancelled() == kOrders);
  const auto mail_after = redis.states(mail);
  CHECK(mail_after == std::vector<std::string>(mail.size(), "delay"));  // outside the filter
  // Each job cancelled once: one cancelled_at each, and the counts add up (a batch cut short by
  // the kill may be missing from them, never counted twice).
  const auto done = end.body["done"].get<int>();
  // The operation's end is audited once, by the instance that ended it, with its counts.
  const std::string log = log_text(w);
  CHECK_THAT(log, Catch::Contains("admin action: {\"access\":\"admin\",\"action\":\"bulk-cancel\"") &&
                      Catch::Contains("\"outcome\":\"ok\"") && Catch::Contains("\"done\":" + std::to_string(done)));
  CHECK(done <= kOrders);
  CHECK(done >= kOrders - 200);
  CHECK(end.body["matched"].get<int>() == done + end.body["failed"].get<int>());
  CHECK(end.body["skipped"].empty());
  std::cout << "console: bulk cancel of " << kOrders << " jobs at 100/s, killed with " << half
            << " cancelled, resumed by another instance: " << cancelled() << " cancelled (counted " << done
            << "), mail jobs outside the filter still waiting: "
            << std::count(mail_after.begin(), mail_after.end(), "delay") << "\n";

  // A second operation, stopped: it ends stopped, and what it did not reach stays waiting.
  const Answer run =
      call(port, "POST", "/jobs/bulk",
           R"({"action": "cancel", "filter": {"business": "mail"}, "dry_run": false, "rate_per_s": 10})");
  REQUIRE(run.status == 202);
  const std::string second_id = run.body["operation"];
  const Answer stop = call(port, "DELETE", "/operations/" + second_id);
  CHECK(stop.status == 202);
  const Answer stopped = wait_operation(port, second_id, "stopped", std::chrono::seconds(10));
  INFO(stopped.body.dump());
  CHECK(stopped.body["status"] == "stopped");
  const auto mail_states = redis.states(mail);
  CHECK(std::count(mail_states.begin(), mail_states.end(), "delay") >= 80);
  CHECK(call(port, "DELETE", "/operations/" + second_id).status == 409);
  const Answer list = call(port, "GET", "/operations");
  CHECK(list.body["operations"].size() == 2);

  // delayctl bulk: the same request from a terminal, run by delayctl itself.
  const auto waiting = std::count(mail_states.begin(), mail_states.end(), "delay");
  const auto [dry_status, dry] = delayctl(w, "bulk --action cancel --business mail --dry-run");
  CHECK(dry_status == 0);
  CHECK(Json::parse(dry)["matched"] == waiting);
  CHECK(delayctl(w, "bulk --action cancel --state failed --dry-run").first == 2);  // names --state
  const auto [run_status, ran] = delayctl(w, "bulk --action cancel --business mail --run --rate 1000");
  INFO(ran);
  CHECK(run_status == 0);
  CHECK(Json::parse(ran)["status"] == "done");
  CHECK(Json::parse(ran)["done"] == waiting);
  CHECK(redis.states(mail) == std::vector<std::string>(mail.size(), "cancelled"));
  CHECK(second.stop() == 0);
}
