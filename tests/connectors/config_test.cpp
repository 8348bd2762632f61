// Configuration mistakes surface as KafkaConfigError naming the property, before any
// connection is attempted; secrets never appear in the message.
#include <mutex>
#include <string>
#include <vector>

#include "connectors/log.hpp"
#include "kafka_test_support.hpp"

using namespace delayd::connectors;
using namespace delayd::connectors::test;

namespace {

template <typename Make>
KafkaConfigError config_error_of(Make make) {
  try {
    make();
  } catch (const KafkaConfigError& e) {
    return e;
  }
  FAIL("no KafkaConfigError was thrown");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("a property librdkafka refuses gives KafkaConfigError naming it", "[kafka]") {
  SECTION("an invalid value") {
    Properties props = base_props();
    props.emplace_back("linger.ms", "abc");
    const auto e = config_error_of([&] { KafkaProducer p(props, {}); });
    CHECK(e.property == "linger.ms");
    CHECK_THAT(e.what(), Catch::StartsWith("kafka property 'linger.ms' = 'abc': "));
    CHECK_THAT(e.what(), Catch::Contains("Invalid value"));
  }
  SECTION("an unknown property, in the consumer") {
    Properties props = consumer_props("unused");
    props.emplace_back("no.such.property", "1");
    const auto e = config_error_of([&] { KafkaConsumer c(props, {}); });
    CHECK(e.property == "no.such.property");
    CHECK_THAT(e.what(), Catch::Contains("no.such.property"));
  }
  SECTION("an unknown property, in the admin client") {
    Properties props = base_props();
    props.emplace_back("no.such.property", "1");
    const auto e = config_error_of([&] { KafkaAdmin a(props); });
    CHECK(e.property == "no.such.property");
  }
  SECTION("a missing group.id") {
    const auto e = config_error_of([&] { KafkaConsumer c(base_props(), {}); });
    CHECK(e.property == "group.id");
  }
  SECTION("a missing bootstrap.servers") {
    const auto e = config_error_of([&] { KafkaProducer p({{"linger.ms", "5"}}, {}); });
    CHECK(e.property == "bootstrap.servers");
  }
  SECTION("properties that contradict each other are refused when the client is created") {
    Properties props = base_props();
    props.emplace_back("acks", "1");  // idempotence, on by default, needs acks=all
    const auto e = config_error_of([&] { KafkaProducer p(props, {}); });
    CHECK(e.property.empty());
    CHECK_THAT(e.what(), Catch::Contains("acks"));
  }
  require_all_clients_destroyed();
}

TEST_CASE("a secret's value never appears in a configuration error", "[kafka]") {
  const KafkaConfigError e("sasl.password", "hunter2", "some reason");
  CHECK(e.property == "sasl.password");
  CHECK_THAT(e.what(), !Catch::Contains("hunter2"));
  CHECK_THAT(e.what(), Catch::Contains("sasl.password"));
}

TEST_CASE("a consumer property that would break manual commits is overridden, with a warning",
          "[kafka]") {
  std::mutex mutex;
  std::vector<std::string> warnings;
  set_log_hook([&](LogLevel level, std::string_view message) {
    std::lock_guard lock(mutex);
    if (level == LogLevel::warning) warnings.emplace_back(message);
  });
  {
    Properties props = consumer_props(unique_name("forced-group"));
    props.emplace_back("enable.auto.commit", "true");
    KafkaConsumer consumer(props, {});
    consumer.close();
  }
  set_log_hook({});
  std::lock_guard lock(mutex);
  bool named = false;
  for (const auto& w : warnings) named = named || w.find("enable.auto.commit") != std::string::npos;
  CHECK(named);
  require_all_clients_destroyed();
}
