// The console's dead letters with the real delayd executable against the local stack (label e2e;
// needs KAFKA_BOOTSTRAP and REDIS_URL): GET /dead-letters lists and filters the dead-letter
// topic, every bad input is refused with the field named, the read token cannot redrive, and a
// redrive brings failed jobs back to life (checked through Kafka: their new ready records; and
// Redis: their state), leaves a record redriven admin.max_redrives times alone, and, killed
// half-way, is resumed by another instance without publishing any dead letter twice (checked
// on the ingest topic itself). delayctl dlq lists and redrives the same way.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <iostream>
#include <map>
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

const std::string kToken = "dlq-test-token";
const std::string kReadToken = "dlq-read-token";

using console::Answer;
using console::wait_states;

Answer call(std::uint16_t port, const std::string& method, const std::string& path, const std::string& body = "",
            const std::string& token = kToken) {
  return console::call(port, method, path, body, token);
}

std::vector<std::string> walk(std::uint16_t port, const std::string& query, int limit) {
  return console::walk(port, "/dead-letters", query, "dead_letters", "id", limit, kToken);
}

Answer wait_operation(std::uint16_t port, const std::string& id, const std::string& status,
                      std::chrono::milliseconds timeout) {
  return console::wait_operation(port, id, status, timeout, kToken);
}

std::pair<int, std::string> delayctl(const World& w, const std::string& args) {
  return console::delayctl(DELAYCTL_BIN, w, args);
}

std::size_t count_where(const Collector& c, const std::string& topic, const std::function<bool(const Record&)>& pred) {
  return static_cast<std::size_t>(std::count_if(c.records().begin(), c.records().end(),
                                                [&](const Record& r) { return r.topic == topic && pred(r); }));
}

// An ingest record the contract refuses (its deliver-at is no time), with a job-id.
delayd::connectors::OutRecord invalid_record(const std::string& id) {
  auto rec = ingest_record(job_at(id, 0, "value of " + id, id, "refunds"));
  for (auto& h : rec.headers) {
    if (h.name == "deliver-at") h.value = "tomorrow";
  }
  return rec;
}

}  // namespace

TEST_CASE("the console lists dead letters, refuses bad input, and a redrive brings failed jobs back",
          "[e2e][admin][console][dlq]") {
  World w("dlq");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.settings["DELAYD_ADMIN_TOKEN"] = kToken;
  w.settings["DELAYD_ADMIN_READ_TOKEN"] = kReadToken;
  w.settings["DELAYD_ADMIN_MAX_REDRIVES"] = "1";
  w.settings["DELAYD_SCHEDULER_BUSINESS"] = "refunds.keep_payload=true,refunds.max_process_attempts=1";
  w.settings["DELAYD_KAFKA_MISSING_TOPIC_TIMEOUT_MS"] = "1000";
  w.settings["DELAYD_KAFKA_MESSAGE_TIMEOUT_MS"] = "1500";
  w.settings["DELAYD_KAFKA_PRODUCER_PROPERTIES"] = kQuickTopicMetadata;
  w.create_topics({"refunds"}, 2);  // not parcels: its job is dead-lettered for the missing topic
  DelaydProcess delayd(w);
  delayd.set_die_with_test(true);
  delayd.start();
  REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 "));
  Publisher pub(w);
  JobReader redis(w);
  const std::string ready = w.ready_topic("refunds");
  Collector out(w, {ready, w.dlq_topic});
  REQUIRE(out.wait_assigned());

  // Four jobs delivered and reported failed on their only attempt: dead letters of the fire
  // path (a business that keeps payloads: one that keeps none has nothing to dead-letter once
  // delivered), jobs failed in Redis. Two ingest records the contract refuses: dead letters of ingest.
  const std::vector<std::string> jobs = {"d-1", "d-2", "d-3", "d-4"};
  for (const auto& id : jobs) pub.send(job_at(id, now_ms(), "value of " + id, id, "refunds"));
  pub.flush();
  REQUIRE(wait_states(redis, jobs, std::vector<std::string>(jobs.size(), "ready")));
  for (const auto& id : jobs) pub.send_report(id, "failed", "refund service down");
  pub.send_raw(invalid_record("x-1"));
  pub.send_raw(invalid_record("x-2"));
  // A job of a business that keeps no payload, failed for want of its ready topic: only its
  // dead letter holds its value.
  pub.send(job_at("p-1", now_ms(), "value of p-1", "p-1", "parcels"));
  pub.flush();
  REQUIRE(wait_states(redis, jobs, std::vector<std::string>(jobs.size(), "failed")));
  REQUIRE(wait_states(redis, {"p-1"}, {"failed"}));  // (wait_states gives it 30 s)
  REQUIRE(out.collect_until(
      [&](const auto&) { return count_where(out, w.dlq_topic, [](const Record&) { return true; }) == 7; },
      std::chrono::seconds(30)));
  const std::int64_t before_redrive = now_ms();

  {  // the list
    const std::vector<std::string> all = walk(port, "", 50);
    CHECK(all.size() == 7);
    for (int limit : {1, 4}) CHECK(walk(port, "", limit) == all);  // each once, whatever the page
    CHECK(walk(port, "business=refunds", 50).size() == 6);         // the invalid ones name it too
    CHECK(walk(port, "reason=topic_missing", 50).size() == 1);
    CHECK(walk(port, "reason=reported_failed", 50).size() == 4);
    CHECK(walk(port, "reason=invalid_record", 50).size() == 2);
    CHECK(walk(port, "reason=DELIVER-AT", 2).size() == 2);  // a piece of the error text, any case
    CHECK(walk(port, "reason=refund%20service%20down", 50).size() == 4);
    CHECK(walk(port, "until=1000", 50).empty());
    CHECK(walk(port, "since=" + std::to_string(before_redrive + 60'000), 50).empty());

    const Answer page = call(port, "GET", "/dead-letters?reason=reported_failed&limit=1");
    REQUIRE(page.status == 200);
    const Json& d = page.body["dead_letters"][0];
    INFO(d.dump());
    CHECK(d["reason"] == "reported_failed");
    CHECK(d["business"] == "refunds");
    CHECK(std::find(jobs.begin(), jobs.end(), d["job_id"].get<std::string>()) != jobs.end());
    CHECK_THAT(d["error"].get<std::string>(), Catch::Contains("refund service down"));
    CHECK(d["source"].is_null());
    CHECK(d["value_kept"] == true);
    CHECK(d["redrive_count"] == 0);
    CHECK(d["size"].get<int>() > 0);
    CHECK(d["at"].get<std::int64_t>() <= now_ms());
    CHECK(page.body["snapshot"] == false);
    const Answer invalid = call(port, "GET", "/dead-letters?reason=invalid_record&limit=1");
    const Json& s = invalid.body["dead_letters"][0]["source"];
    INFO(invalid.body.dump());
    CHECK(s["topic"] == w.ingest_topic);
    CHECK(s["offset"].get<std::int64_t>() >= 0);
  }

  {  // bad input, each naming its field
    const std::pair<std::string, std::string> gets[] = {
        {"/dead-letters?limit=10000", "limit"},
        {"/dead-letters?limit=0", "limit"},
        {"/dead-letters?since=yesterday", "since"},
        {"/dead-letters?since=2000&until=1000", "since"},
        {"/dead-letters?business=no%20spaces", "business"},
        {"/dead-letters?reason=" + std::string(201, 'x'), "reason"},
        {"/dead-letters?state=failed", "state"},
        {"/dead-letters?cursor=d1.0000000000000000.0-0", "cursor"},
    };
    for (const auto& [path, field] : gets) {
      const Answer a = call(port, "GET", path);
      INFO(path << " -> " << a.body.dump());
      CHECK(a.status == 400);
      CHECK(a.body["field"] == field);
    }
    // The cursor of another walk.
    const Answer first = call(port, "GET", "/dead-letters?business=refunds&limit=1");
    REQUIRE(first.body["next"].is_string());
    const Answer other =
        call(port, "GET", "/dead-letters?reason=invalid_record&cursor=" + first.body["next"].get<std::string>());
    CHECK(other.status == 400);
    CHECK(other.body["field"] == "cursor");
    const std::pair<std::string, std::string> posts[] = {
        {R"({"filter": {}})", "dry_run"},
        {R"({"filter": {}, "dry_run": true, "force": true})", "force"},
        {R"({"filter": {"limit": "5"}, "dry_run": true})", "filter.limit"},
        {R"({"filter": {"business": "a b"}, "dry_run": true})", "filter.business"},
        {R"({"filter": {}, "dry_run": false, "rate_per_s": 0})", "rate_per_s"},
        {R"({"filter": [], "dry_run": true})", "filter"},
        {R"({"dry_run": true})", "filter"},
        {R"(not json)", "body"},
    };
    for (const auto& [body, field] : posts) {
      const Answer a = call(port, "POST", "/dead-letters/redrive", body);
      INFO(body << " -> " << a.body.dump());
      CHECK(a.status == 400);
      CHECK(a.body["field"] == field);
    }
    CHECK(call(port, "GET", "/dead-letters/redrive").status == 405);
  }

  {  // the read token reads, and cannot redrive
    CHECK(call(port, "GET", "/dead-letters?limit=1", "", kReadToken).status == 200);
    const Answer a = call(port, "POST", "/dead-letters/redrive", R"({"filter": {}, "dry_run": false})", kReadToken);
    CHECK(a.status == 403);
    CHECK(call(port, "GET", "/operations").body["operations"].empty());
  }

  {  // retry of a failed job whose payload is gone: from its dead letter, once its topic exists
    const std::optional<std::string> dl = redis.field("p-1", "dl");  // where its dead letter is
    REQUIRE(dl.has_value());
    w.create_topics({"parcels"}, 2);
    Collector parcels(w, {w.ready_topic("parcels")});
    // delayd's producer learns of the new topic with a metadata refresh; until then a delivery
    // meets "unknown topic" again and, the topic having been missing for longer than the
    // timeout, is dead-lettered at once. A new job of the business delivered shows it has.
    const auto settled = [&](const std::string& id) {
      std::string state;
      for (int tries = 0; tries < 300 && state != "ready" && state != "failed"; ++tries) {
        if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        state = redis.states({id}).front();
      }
      return state;
    };
    // (A delivery that meets the cached "unknown" fails at once: one try every 500 ms, for 30 s.)
    std::string warm_state;
    for (int warm = 1; warm <= 60 && warm_state != "ready"; ++warm) {
      if (warm > 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const std::string id = "p-warm-" + std::to_string(warm);
      pub.send(job_at(id, now_ms(), "v", id, "parcels"));
      pub.flush();
      warm_state = settled(id);
    }
    REQUIRE(warm_state == "ready");
    const Answer a = call(port, "POST", "/jobs/p-1/retry");
    INFO(a.body.dump());
    CHECK(a.status == 200);
    CHECK(a.body["source"] == "dead_letter");
    CHECK(a.body["retried"] == true);
    CHECK(a.body["dead_letter"] == *dl);
    REQUIRE(parcels.collect_until(
        [&](const auto& recs) {
          return std::any_of(recs.begin(), recs.end(), [](const Record& r) {
            return header(r, "job-id") == "p-1" && header(r, "redrive-count") == "1" && r.value == "value of p-1";
          });
        },
        std::chrono::seconds(30)));
    CHECK(wait_states(redis, {"p-1"}, {"ready"}));
    CHECK(call(port, "POST", "/jobs/p-1/retry").status == 409);  // not failed any more
  }

  // The dry run counts the four; the redrive publishes them back and the jobs live again.
  const std::string failed_filter = R"({"reason": "reported_failed"})";
  const Answer dry =
      call(port, "POST", "/dead-letters/redrive", R"({"filter": )" + failed_filter + R"(, "dry_run": true})");
  INFO(dry.body.dump());
  REQUIRE(dry.status == 200);
  CHECK(dry.body["matched"] == 4);
  CHECK(dry.body["complete"] == true);
  CHECK(redis.states(jobs) == std::vector<std::string>(jobs.size(), "failed"));
  const Answer run =
      call(port, "POST", "/dead-letters/redrive", R"({"filter": )" + failed_filter + R"(, "dry_run": false})");
  INFO(run.body.dump());
  REQUIRE(run.status == 202);
  const Answer end = wait_operation(port, run.body["operation"], "done", std::chrono::seconds(60));
  INFO(end.body.dump());
  REQUIRE(end.body["status"] == "done");
  CHECK(end.body["action"] == "redrive");
  CHECK(end.body["matched"] == 4);
  CHECK(end.body["done"] == 4);
  // Kafka: each job's second ready record, a first attempt again, saying it was redriven once.
  const auto redriven_ready = [&](const std::string& id) {
    return count_where(out, ready, [&](const Record& r) {
      return header(r, "job-id") == id && header(r, "redrive-count") == "1" && header(r, "attempt") == "1";
    });
  };
  REQUIRE(out.collect_until(
      [&](const auto&) {
        return std::all_of(jobs.begin(), jobs.end(), [&](const auto& id) { return redriven_ready(id) == 1; });
      },
      std::chrono::seconds(30)));
  // Redis: delivered again, with the history of it.
  REQUIRE(wait_states(redis, jobs, std::vector<std::string>(jobs.size(), "ready")));
  CHECK(redis.field("d-1", "redrive_count") == "1");
  const auto history = redis.history("d-1");
  CHECK(std::any_of(history.begin(), history.end(),
                    [](const std::string& h) { return h.find(" redriven ") != std::string::npos; }));
  // The audit line of the operation's end.
  CHECK_THAT(log_text(w), Catch::Contains("\"action\":\"redrive\"") && Catch::Contains("\"outcome\":\"ok\""));

  // The same dead letters redriven again: published again, and the jobs (revived by redrive 1
  // already) are not delivered a third time.
  const Answer again =
      call(port, "POST", "/dead-letters/redrive", R"({"filter": )" + failed_filter + R"(, "dry_run": false})");
  REQUIRE(again.status == 202);
  REQUIRE(wait_operation(port, again.body["operation"], "done", std::chrono::seconds(60)).body["status"] == "done");

  // They fail again: their new dead letters say redrive-count 1, which is admin.max_redrives, so
  // a redrive leaves them where they are and says why.
  for (const auto& id : jobs) pub.send_report(id, "failed", "refund service down again");
  pub.flush();
  REQUIRE(wait_states(redis, jobs, std::vector<std::string>(jobs.size(), "failed")));
  REQUIRE(out.collect_until(
      [&](const auto&) {
        return count_where(out, w.dlq_topic, [](const Record& r) { return header(r, "redrive-count") == "1"; }) >= 4;
      },
      std::chrono::seconds(30)));
  const std::string since = std::to_string(before_redrive);
  const Answer third = call(port, "POST", "/dead-letters/redrive",
                            R"({"filter": {"reason": "again", "since": ")" + since + R"("}, "dry_run": false})");
  REQUIRE(third.status == 202);
  const Answer skipped = wait_operation(port, third.body["operation"], "done", std::chrono::seconds(60));
  INFO(skipped.body.dump());
  CHECK(skipped.body["matched"] == 4);
  CHECK(skipped.body["done"] == 0);
  CHECK(skipped.body["skipped"]["redriven 1 times already (admin.max_redrives 1)"] == 4);
  // Reading on for 3 s: a window for a wrong third delivery to show.
  out.collect_until([](const auto&) { return false; }, std::chrono::seconds(3));
  for (const auto& id : jobs) {
    INFO(id);
    CHECK(redriven_ready(id) == 1);
    CHECK(count_where(out, ready, [&](const Record& r) { return header(r, "job-id") == id; }) == 2);
  }
  CHECK(redis.states(jobs) == std::vector<std::string>(jobs.size(), "failed"));

  {  // delayctl dlq: the same list and redrive from a terminal
    const auto [list_status, listed] = delayctl(w, "dlq list --reason invalid_record --all");
    INFO(listed);
    CHECK(list_status == 0);
    std::istringstream lines(listed);
    std::size_t n = 0;
    for (std::string line; std::getline(lines, line); ++n) CHECK(Json::parse(line)["reason"] == "invalid_record");
    CHECK(n == 2);
    CHECK(delayctl(w, "dlq list --since yesterday").first == 2);  // names --since
    const auto [dry_status, dry] = delayctl(w, "dlq redrive --reason invalid_record --dry-run");
    INFO(dry);
    CHECK(dry_status == 0);
    CHECK(Json::parse(dry)["matched"] == 2);
    Collector ingest(w, {w.ingest_topic});
    REQUIRE(ingest.wait_assigned());
    const auto [run_status, ran] = delayctl(w, "dlq redrive --reason invalid_record --run");
    INFO(ran);
    CHECK(run_status == 0);
    CHECK(Json::parse(ran)["status"] == "done");
    const auto redriven_invalid = [](const Record& r) {
      return header(r, "job-id").value_or("").starts_with("x-") && header(r, "redrive-count") == "1";
    };
    // Published back once each, and, still invalid, dead-lettered again saying so.
    CHECK(ingest.collect_until([&](const auto&) { return count_where(ingest, w.ingest_topic, redriven_invalid) == 2; },
                               std::chrono::seconds(30)));
    CHECK(out.collect_until(
        [&](const auto&) {
          return count_where(out, w.dlq_topic, [&](const Record& r) {
                   return redriven_invalid(r) && header(r, "reason") == "invalid_record";
                 }) == 2;
        },
        std::chrono::seconds(30)));
  }
  std::cout << "dead letters: 7 listed (4 failed jobs, 2 refused records, 1 missing topic) with every filter; "
               "one retried from its dead letter; 4 redriven and delivered again (redrive-count 1), a second "
               "redrive delivered nothing more, 4 over admin.max_redrives left alone; delayctl dlq listed 2 and "
               "redrove them\n";
}

TEST_CASE("a redrive killed half-way is resumed by another instance and publishes each dead letter once",
          "[e2e][admin][console][dlq]") {
  World w("dlqkill");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.settings["DELAYD_ADMIN_TOKEN"] = kToken;
  w.create_topics({"refunds"}, 2);
  constexpr int kLetters = 400;
  Publisher pub(w);
  for (int i = 0; i < kLetters; ++i) pub.send_raw(invalid_record("k-" + std::to_string(i)));
  pub.flush();
  Collector ingest(w, {w.ingest_topic, w.dlq_topic});
  REQUIRE(ingest.wait_assigned());

  std::string id;
  {
    DelaydProcess first(w);
    first.set_die_with_test(true);
    first.start();
    REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 "));
    REQUIRE(ingest.collect_until(
        [&](const auto&) { return count_where(ingest, w.dlq_topic, [](const Record&) { return true; }) == kLetters; },
        std::chrono::seconds(60)));
    const Answer run =
        call(port, "POST", "/dead-letters/redrive", R"({"filter": {}, "dry_run": false, "rate_per_s": 100})");
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
    CHECK(progress.body["done"].get<int>() < kLetters);
    first.kill9();
  }
  DelaydProcess second(w);
  second.set_die_with_test(true);
  second.start();
  REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 "));
  const Answer end = wait_operation(port, id, "done", std::chrono::seconds(90));
  INFO(end.body.dump());
  REQUIRE(end.body["status"] == "done");
  // The ingest topic itself: every dead letter of the walk published back exactly once by it.
  const auto by_operation = [&] {
    std::map<std::string, int> n;
    for (const Record& r : ingest.records()) {
      if (r.topic == w.ingest_topic && header(r, "redrive-operation") == id) ++n[*header(r, "redriven-from")];
    }
    return n;
  };
  REQUIRE(
      ingest.collect_until([&](const auto&) { return by_operation().size() == kLetters; }, std::chrono::seconds(30)));
  ingest.collect_until([](const auto&) { return false; }, std::chrono::seconds(2));  // a late duplicate shows
  const auto published = by_operation();
  CHECK(published.size() == kLetters);
  CHECK(std::all_of(published.begin(), published.end(), [](const auto& p) { return p.second == 1; }));
  CHECK(end.body["done"] == kLetters);
  CHECK(end.body["matched"] == kLetters);
  std::cout << "dead letters: a redrive of " << kLetters << " killed with some published, resumed by another "
            << "instance: " << published.size() << " published back, each once\n";
}
