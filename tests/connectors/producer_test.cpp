// The producer's failure paths: each ends in a report with ok=false, never a throw or a hang,
// except a queue that stays full, which is the caller's to handle.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kafka_test_support.hpp"

using namespace delayd::connectors;
using namespace delayd::connectors::test;
using Clock = std::chrono::steady_clock;

namespace {

// Polls until `reports` holds `n` entries or `timeout` passes.
void poll_until(KafkaProducer& producer, const std::vector<DeliveryReport>& reports, std::size_t n,
                std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (reports.size() < n && Clock::now() < deadline) producer.poll(100);
}

}  // namespace

TEST_CASE("a record for a topic that does not exist is reported failed within message.timeout.ms", "[kafka]") {
  std::vector<DeliveryReport> reports;
  {
    Properties props = base_props();
    props.emplace_back("message.timeout.ms", "3000");
    KafkaProducer producer(props, [&](const DeliveryReport& r) { reports.push_back(r); });

    OutRecord rec;
    rec.topic = unique_name("never-created");
    rec.value = "lost?";
    rec.tag = 7;
    const auto start = Clock::now();
    REQUIRE_NOTHROW(producer.produce(rec));
    poll_until(producer, reports, 1, std::chrono::seconds(20));
    CHECK(Clock::now() - start < std::chrono::seconds(20));

    REQUIRE(reports.size() == 1);
    CHECK_FALSE(reports[0].ok);
    CHECK_FALSE(reports[0].error.empty());
    CHECK(reports[0].tag == 7);
    CHECK(reports[0].topic == rec.topic);
    CHECK(producer.outstanding() == 0);
    CHECK(producer.flush(1000));
  }
  require_all_clients_destroyed();
}

TEST_CASE("a record refused at enqueue time is reported through the handler, not thrown", "[kafka]") {
  const std::string topic = create_topic("too-large", 1);
  std::vector<DeliveryReport> reports;
  {
    Properties props = base_props();
    props.emplace_back("message.max.bytes", "2000");
    KafkaProducer producer(props, [&](const DeliveryReport& r) { reports.push_back(r); });

    OutRecord rec;
    rec.topic = topic;
    rec.value = std::string(10000, 'x');
    rec.tag = 9;
    REQUIRE_NOTHROW(producer.produce(rec));
    // Refused before it was queued: the report is already there and nothing is outstanding.
    REQUIRE(reports.size() == 1);
    CHECK_FALSE(reports[0].ok);
    CHECK(reports[0].tag == 9);
    CHECK(reports[0].topic == topic);
    CHECK_THAT(reports[0].error, Catch::Contains("too large", Catch::CaseSensitive::No));
    CHECK(producer.outstanding() == 0);

    OutRecord nameless;
    nameless.topic = "";
    nameless.tag = 10;
    REQUIRE_NOTHROW(producer.produce(nameless));
    poll_until(producer, reports, 2, std::chrono::seconds(10));
    REQUIRE(reports.size() == 2);
    CHECK_FALSE(reports[1].ok);
    CHECK(reports[1].tag == 10);
  }
  require_all_clients_destroyed();
}

TEST_CASE("an exception from the report handler leaves the call that served the report", "[kafka]") {
  const std::string topic = create_topic("handler-throws", 1);
  {
    int calls = 0;
    KafkaProducer producer(base_props(), [&](const DeliveryReport&) {
      ++calls;
      throw std::runtime_error("handler failed");
    });
    OutRecord rec;
    rec.topic = topic;
    rec.value = "v";
    producer.produce(rec);
    CHECK_THROWS_WITH(producer.flush(15000), "handler failed");
    CHECK(calls == 1);
    CHECK(producer.outstanding() == 0);
  }
  require_all_clients_destroyed();
}

TEST_CASE("produce throws KafkaError when the queue stays full for the whole timeout", "[kafka]") {
  {
    // Nothing listens on port 1, so nothing leaves the queue.
    KafkaProducer producer(
        {{"bootstrap.servers", "127.0.0.1:1"}, {"queue.buffering.max.messages", "1"}, {"log_level", "0"}},
        [](const DeliveryReport&) {});
    OutRecord rec;
    rec.topic = "anything";
    rec.value = "v";
    producer.produce(rec);
    CHECK(producer.outstanding() == 1);
    const auto start = Clock::now();
    CHECK_THROWS_AS(producer.produce(rec, 300), KafkaError);
    CHECK(Clock::now() - start >= std::chrono::milliseconds(300));
    CHECK(producer.outstanding() == 1);
    CHECK_FALSE(producer.flush(0));
  }
  require_all_clients_destroyed();
}

TEST_CASE("a queued report calls the wake hook without a poll, on a recovered instance too", "[kafka]") {
  const std::string topic = create_topic("wake-hook", 1);
  {
    std::mutex m;
    std::condition_variable woken;
    int wakes = 0;
    std::vector<DeliveryReport> reports;
    KafkaProducer producer(base_props(), [&](const DeliveryReport& r) { reports.push_back(r); });
    producer.on_reports_queued([&] {
      std::lock_guard<std::mutex> lock(m);
      ++wakes;
      woken.notify_all();
    });
    auto wakes_now = [&] {
      std::lock_guard<std::mutex> lock(m);
      return wakes;
    };
    auto produce = [&](std::uint64_t tag) {
      producer.poll(0);  // serves what is queued, so that the record's report finds the queue empty
      OutRecord rec;
      rec.topic = topic;
      rec.value = "v";
      rec.tag = tag;
      producer.produce(rec);
    };
    // Nothing polls while this waits: only the hook, from a librdkafka thread, ends it early.
    auto woken_since = [&](int before) {
      std::unique_lock<std::mutex> lock(m);
      return woken.wait_for(lock, std::chrono::seconds(15), [&] { return wakes > before; });
    };

    int before = wakes_now();
    produce(1);
    CHECK(woken_since(before));
    poll_until(producer, reports, 1, std::chrono::seconds(15));
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].ok);

    producer.inject_fatal_error_for_testing("injected by the test");
    REQUIRE(producer.recover_if_fatal().has_value());
    before = wakes_now();
    produce(2);
    CHECK(woken_since(before));
    poll_until(producer, reports, 2, std::chrono::seconds(15));
    REQUIRE(reports.size() == 2);
    CHECK(reports[1].ok);

    // Removed: the report is queued and served as before, and the hook is not called.
    producer.on_reports_queued({});
    before = wakes_now();
    produce(3);
    CHECK(producer.flush(15000));
    REQUIRE(reports.size() == 3);
    CHECK(reports[2].ok);
    CHECK(wakes_now() == before);
  }
  require_all_clients_destroyed();
}
