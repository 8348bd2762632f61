// Shared helpers for the connector tests: where the stack's Kafka is, unique topic names, and
// loops that poll until a condition holds or a deadline passes (never forever).
#pragma once

#include <librdkafka/rdkafkacpp.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_producer.hpp"

namespace delayd::connectors::test {

inline std::string bootstrap() {
  const char* v = std::getenv("KAFKA_BOOTSTRAP");
  if (v == nullptr || *v == '\0') {
    FAIL(
        "KAFKA_BOOTSTRAP is not set: start the stack with scripts/stack.sh up and export its env "
        "(eval \"$(scripts/stack.sh env | sed 's/^/export /')\"), or run scripts/test.sh");
  }
  return v;
}

// Unique per process and per call, so reruns and parallel test processes never share a topic
// or a consumer group.
inline std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return "delayd-test." + prefix + "." + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-" + std::to_string(counter++);
}

inline Properties base_props() { return {{"bootstrap.servers", bootstrap()}}; }

inline std::string create_topic(const std::string& prefix, int partitions) {
  const std::string topic = unique_name(prefix);
  KafkaAdmin admin(base_props());
  admin.ensure_topics({topic}, partitions, 1);
  return topic;
}

inline Properties consumer_props(const std::string& group) {
  Properties p = base_props();
  p.emplace_back("group.id", group);
  // Short enough that a test member that dies does not hold a partition for long.
  p.emplace_back("session.timeout.ms", "6000");
  return p;
}

// Polls until `want` records have arrived or `timeout` passes.
inline std::vector<Record> consume_n(KafkaConsumer& consumer, std::size_t want,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::vector<Record> got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    for (auto& r : consumer.poll_batch(want - got.size(), 200)) got.push_back(std::move(r));
  }
  return got;
}

// Every librdkafka handle a test made must be gone when it ends, or the sanitizer build would
// report librdkafka's memory as leaked.
inline void require_all_clients_destroyed() { REQUIRE(RdKafka::wait_destroyed(10000) == 0); }

}  // namespace delayd::connectors::test
