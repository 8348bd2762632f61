// Thousands of jobs, several businesses, delays from the past up to 10 s, many on one instant:
// each arrives exactly once on its ready topic, never before its deliver-at, and Redis says
// ready for each. Lateness percentiles are printed (the figures belong to README, not asserts).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "contract/time_format.hpp"
#include "harness.hpp"

using namespace delayd::e2e;

TEST_CASE("every job arrives exactly once, never early, and is marked ready", "[e2e][delivery]") {
  const std::vector<std::string> businesses{"orders", "mail", "billing", "push"};
  World w("delivery");
  w.create_topics(businesses);
  DelaydProcess delayd(w);
  delayd.start();
  std::vector<std::string> topics;
  for (const auto& b : businesses) topics.push_back(w.ready_topic(b));
  Collector ready(w, topics);
  // Reading before the first job is due, so that when a record reached the collector says
  // when a consumer could have acted on it.
  REQUIRE(ready.wait_assigned());

  constexpr int kJobs = 3000;
  std::mt19937_64 rng(20261122);
  std::uniform_int_distribution<std::int64_t> delay(0, 10000);
  Publisher pub(w);
  const std::int64_t base = now_ms() + 500;
  const std::int64_t shared_instant = base + 4000;
  std::map<std::string, std::int64_t> expected;  // job-id -> deliver-at
  std::map<std::string, std::int64_t> sent_at;   // job-id -> when it was handed to the producer
  std::set<std::string> overdue;                 // deliver-at already past when published
  for (int i = 0; i < kJobs; ++i) {
    Job j;
    j.job_id = "job-" + std::to_string(i);
    j.business = businesses[static_cast<size_t>(i) % businesses.size()];
    j.key = "key-" + std::to_string(i % 97);
    j.value = "payload " + std::to_string(i);
    j.extra = {{"trace-id", "t" + std::to_string(i)}};
    std::int64_t at;
    if (i % 10 == 0) {
      at = base - 60000 - i;  // in the past: fires at once
      overdue.insert(j.job_id);
    } else if (i % 10 == 1) {
      at = shared_instant;  // 300 jobs on one millisecond
    } else {
      at = base + delay(rng);
    }
    // Both forms of deliver-at are part of the contract.
    j.deliver_at = (i % 7 == 0) ? delayd::contract::format_rfc3339_ms(at) : std::to_string(at);
    expected[j.job_id] = at;
    sent_at[j.job_id] = now_ms();
    pub.send(j);
  }
  pub.flush();

  const bool all =
      ready.collect_until([&](const auto& recs) { return recs.size() >= expected.size(); }, std::chrono::seconds(90));
  // Anything extra would show up right behind the last expected record.
  ready.collect_until([](const auto&) { return false; }, std::chrono::milliseconds(1500));
  INFO("received " << ready.records().size() << " of " << expected.size());
  REQUIRE(all);

  // The ready mark follows Kafka's acknowledgement; a clean stop settles the last of them.
  CHECK(delayd.stop() == 0);
  JobReader redis(w);
  std::vector<std::string> ids;
  for (const auto& [id, at] : expected) ids.push_back(id);
  // A job can only be on time if delayd had it before it was due, and the job record keeps no
  // acceptance time (its first line is short on purpose: storage/key_schema.hpp); so lateness is
  // also measured from max(deliver-at, sent), sent being when this test handed the job to its
  // producer (a lower bound of when delayd had it).

  std::map<std::string, int> seen;
  std::vector<std::int64_t> lateness, from_deliver_at, at_consumer;
  int early = 0;
  for (std::size_t i = 0; i < ready.records().size(); ++i) {
    const auto& r = ready.records()[i];
    const auto id = header(r, "job-id");
    REQUIRE(id.has_value());
    ++seen[*id];
    REQUIRE(expected.count(*id) == 1);
    const std::int64_t at = expected[*id];
    CHECK(header(r, "deliver-at") == std::to_string(at));
    CHECK(header(r, "attempt") == "1");
    CHECK(header(r, "business").has_value());
    const int n = std::stoi(id->substr(4));
    CHECK(r.topic == w.ready_topic(businesses[static_cast<size_t>(n) % businesses.size()]));
    CHECK(r.value == "payload " + std::to_string(n));
    CHECK(r.key == "key-" + std::to_string(n % 97));
    CHECK(header(r, "trace-id") == "t" + std::to_string(n));
    if (r.timestamp_ms < at) ++early;
    if (!overdue.count(*id)) {
      from_deliver_at.push_back(r.timestamp_ms - at);
      lateness.push_back(r.timestamp_ms - std::max(at, sent_at[*id]));
      at_consumer.push_back(ready.received_ms()[i] - at);
    }
  }
  CHECK(early == 0);
  CHECK(seen.size() == expected.size());
  for (const auto& [id, count] : seen) {
    INFO(id);
    CHECK(count == 1);
  }

  auto print = [](const char* what, std::vector<std::int64_t> v) {
    std::sort(v.begin(), v.end());
    std::cout << "lateness (ms) " << what << " over " << v.size() << " jobs: p50 " << percentile(v, 50) << ", p90 "
              << percentile(v, 90) << ", p99 " << percentile(v, 99) << ", max " << v.back() << "\n";
  };
  print("after max(deliver-at, sent)", lateness);
  print("after deliver-at", from_deliver_at);
  // By the record's timestamp (delayd's produce call) a record held inside librdkafka looks on
  // time; this one is not fooled by that.
  print("at the consumer, after deliver-at", at_consumer);

  const auto states = redis.states(ids);
  CHECK(std::count(states.begin(), states.end(), "ready") == static_cast<long>(ids.size()));
}

// The producer holds records for linger.ms so that under load they leave in few requests; the
// loop kicks it when it is about to sleep (broker/linger_kick.hpp), so a lone record does not
// wait the linger out. With a linger of 2 s, a lone job reaches the reader well before the
// linger would have let its record go. The topic's very first record is one of them: a kick
// sends only what knows its partition, so the fire path has the producer learn the topic when
// it holds the claimed record (KafkaProducer::prepare()); without that, over SASL_SSL, the
// first record waited the linger. The second job is due more than a linger after the first
// kick: the loop kicks at most once per linger.
TEST_CASE("a lone ready record is sent without waiting out the producer's linger", "[e2e][delivery]") {
  constexpr std::int64_t kLingerMs = 2000;
  World w("kick");
  w.settings["DELAYD_KAFKA_PRODUCER_PROPERTIES"] = "linger.ms=" + std::to_string(kLingerMs);
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Collector ready(w, {w.ready_topic("orders")});
  REQUIRE(ready.wait_assigned());
  Publisher pub(w);
  // The first record of its topic (claimed ahead, so the producer learns the topic before it is
  // due), then another, due more than a linger after it (one kick per linger).
  const std::pair<std::string, std::int64_t> jobs[] = {{"first-0", 1000}, {"lone-0", kLingerMs + 500}};
  for (const auto& [id, ahead_ms] : jobs) {
    const std::int64_t due = now_ms() + ahead_ms;
    pub.send(job_at(id, due, "alone"));
    pub.flush();
    const std::size_t seen = ready.records().size();
    REQUIRE(
        ready.collect_until([&](const auto& recs) { return recs.size() > seen; }, std::chrono::milliseconds(30000)));
    const std::int64_t late = ready.received_ms().back() - due;
    std::printf("%s with linger.ms %lld: read %lld ms after its deliver-at (stamped %lld ms after it)\n", id.c_str(),
                static_cast<long long>(kLingerMs), static_cast<long long>(late),
                static_cast<long long>(ready.records().back().timestamp_ms - due));
    CHECK(header(ready.records().back(), "job-id") == id);
    CHECK(ready.records().back().timestamp_ms >= due);
    CHECK(late < kLingerMs / 2);
  }
  CHECK(delayd.stop() == 0);
}
