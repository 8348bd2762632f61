// Invalid ingest records land on the dead-letter topic with a reason, between valid jobs that
// keep flowing; and a job whose ready topic cannot be written ends failed, on the dead-letter
// topic, after its attempts.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace delayd::e2e;
using delayd::connectors::OutRecord;

TEST_CASE("each invalid record is dead-lettered with its reason while valid jobs flow", "[e2e][dlq]") {
  World w("badinput");
  w.settings["DELAYD_SCHEDULER_MAX_VALUE_BYTES"] = "1000";
  w.create_topics({"orders"}, 1);  // one partition: the order of records is the order sent
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);

  const std::int64_t soon_ms = now_ms() + 300;
  const std::string soon = std::to_string(soon_ms);
  struct Case {
    std::string name;
    delayd::connectors::Headers headers;
    std::string value;
    std::string reason_has;
  };
  const std::vector<Case> cases{
      {"no-deliver-at", {{"business", "orders"}}, "x", "deliver-at"},
      {"garbled-deliver-at", {{"deliver-at", "tomorrow"}, {"business", "orders"}}, "x", "tomorrow"},
      {"bad-business", {{"deliver-at", soon}, {"business", "no spaces!"}}, "x", "business"},
      {"no-business", {{"deliver-at", soon}}, "x", "business"},
      {"oversize", {{"deliver-at", soon}, {"business", "orders"}}, std::string(2000, 'v'), "1000"},
      {"bad-job-id", {{"deliver-at", soon}, {"business", "orders"}, {"job-id", "has space"}}, "x", "job-id"},
      {"bad-op", {{"op", "delete"}, {"job-id", "j"}}, "x", "op"},
      {"cancel-without-id", {{"op", "cancel"}}, "x", "job-id"},
      {"both-times", {{"deliver-at", soon}, {"delay-ms", "5"}, {"business", "orders"}}, "x", "delay-ms"},
  };
  int valid = 0;
  for (const auto& c : cases) {
    pub.send(job_at("valid-" + std::to_string(valid++), soon_ms, "ok"));
    OutRecord rec;
    rec.key = c.name;
    rec.value = c.value;
    rec.headers = c.headers;
    rec.headers.push_back({"case", c.name});
    pub.send_raw(rec);
  }
  pub.send(job_at("valid-" + std::to_string(valid++), soon_ms, "ok"));
  pub.flush();

  Collector dlq(w, {w.dlq_topic});
  REQUIRE(dlq.collect_until([&](const auto& recs) { return recs.size() >= cases.size(); }, std::chrono::seconds(30)));
  Collector ready(w, {w.ready_topic("orders")});
  REQUIRE(ready.collect_until([&](const auto& recs) { return recs.size() >= static_cast<size_t>(valid); },
                              std::chrono::seconds(30)));

  REQUIRE(dlq.records().size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& r = dlq.records()[i];
    INFO("case " << cases[i].name << ", error header: " << header(r, "error").value_or("<none>"));
    CHECK(header(r, "case") == cases[i].name);
    CHECK(r.key == cases[i].name);
    CHECK(r.value == cases[i].value);
    REQUIRE(header(r, "error").has_value());
    CHECK_THAT(*header(r, "error"), Catch::Contains(cases[i].reason_has));
    CHECK(header(r, "source-topic") == w.ingest_topic);
    CHECK(header(r, "source-offset").has_value());
  }
  CHECK(ready.records().size() == static_cast<size_t>(valid));
  CHECK(delayd.stop() == 0);
}

// A business whose ready topic does not exist, and delayd may not create it: its job waits
// without spending attempts (a missing topic is the topic's fault, not the job's), then is
// dead-lettered with its value and a reason once the topic has been missing for
// kafka.missing_topic_timeout_ms. Another business's job is not held up meanwhile. (Kafka refusing
// a record for good, the "after N attempts" path, is decide()'s case in fault_paths_test.)
TEST_CASE("a job whose ready topic does not exist is dead-lettered after the missing-topic timeout", "[e2e][dlq]") {
  World w("undeliverable");
  w.settings["DELAYD_KAFKA_MISSING_TOPIC_TIMEOUT_MS"] = "1000";
  w.settings["DELAYD_KAFKA_MESSAGE_TIMEOUT_MS"] = "1500";
  w.settings["DELAYD_KAFKA_PRODUCER_PROPERTIES"] = kQuickTopicMetadata;
  w.create_topics({"orders"});  // no topic for business "nowhere", and delayd may not create it
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  pub.send(job_at("lost-cause", now_ms(), "v", std::nullopt, "nowhere"));
  pub.send(job_at("fine", now_ms(), "v"));
  pub.flush();

  Collector dlq(w, {w.dlq_topic});
  // librdkafka calls a topic unknown after topic.metadata.propagation.max.ms (kQuickTopicMetadata).
  REQUIRE(dlq.collect_until([](const auto& recs) { return !recs.empty(); }, std::chrono::seconds(90)));
  const auto& r = dlq.records().front();
  CHECK(header(r, "job-id") == "lost-cause");
  CHECK(header(r, "attempt") == "1");  // every wait for the topic was refunded
  REQUIRE(header(r, "error").has_value());
  CHECK_THAT(*header(r, "error"), Catch::Contains("ready topic " + w.ready_topic("nowhere") + " has not existed for"));
  CHECK(r.value == "v");

  // The dead-letter record is written before the state changes; a clean stop settles it.
  CHECK(delayd.stop() == 0);
  JobReader redis(w);
  CHECK(redis.field("lost-cause", "state") == "failed");
  CHECK_THAT(redis.field("lost-cause", "error").value_or(""), Catch::Contains(w.ready_topic("nowhere")));
  CHECK(redis.field("fine", "state") == "ready");
}
