// Configuration mistakes surface as KafkaConfigError naming the property, before any
// connection is attempted; secrets never appear in the message.
#include <librdkafka/rdkafka.h>

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
  SECTION("a number librdkafka would read only in part") {
    // librdkafka keeps what strtol could read: 8192, 8 (octal) and 1 without a word.
    for (const std::string bad : {"8192,fetch.wait.max.ms=10", "010", "1e6", "5ms"}) {
      Properties props = consumer_props("unused");
      props.emplace_back("fetch.min.bytes", bad);
      const auto e = config_error_of([&] { KafkaConsumer c(props, {}); });
      CHECK(e.property == "fetch.min.bytes");
      CHECK_THAT(e.what(), Catch::Contains("librdkafka would read it as"));
    }
    Properties props = base_props();
    props.emplace_back("linger.ms", "5 and more");
    const auto e = config_error_of([&] { KafkaProducer p(props, {}); });
    CHECK(e.property == "linger.ms");
    CHECK_THAT(e.what(), Catch::Contains("as 5;"));
  }
  SECTION("numbers written plainly, words and text pass") {
    Properties props = base_props();
    for (const auto& [k, v] : Properties{{"linger.ms", " 7 "},
                                         {"acks", "all"},
                                         {"batch.num.messages", "0x10"},
                                         {"compression.type", "zstd"},
                                         {"client.id", "0042"}}) {
      props.emplace_back(k, v);
    }
    KafkaProducer p(props, {});
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

TEST_CASE("a consumer property that would break manual commits is overridden, with a warning", "[kafka]") {
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

TEST_CASE("a failed login and a missing ACL are refusals that name what was refused and to whom", "[kafka]") {
  CHECK(refusal_of(RD_KAFKA_RESP_ERR__AUTHENTICATION) == Refusal::authentication);
  CHECK(refusal_of(RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED) == Refusal::authentication);
  for (auto code :
       {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
        RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED}) {
    CHECK(refusal_of(code) == Refusal::authorization);
  }
  for (auto code : {RD_KAFKA_RESP_ERR_NO_ERROR, RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
                    RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE}) {
    CHECK(refusal_of(code) == Refusal::none);
  }

  const std::string who = principal_of({{"sasl.username", "delayd"}, {"sasl.mechanisms", "SCRAM-SHA-512"}});
  CHECK(who == "user delayd (SASL SCRAM-SHA-512)");
  CHECK(principal_of({{"bootstrap.servers", "k:9092"}}) == "the client (no SASL login)");
  CHECK(refusal_sentence(Refusal::authentication, who, "", "", "bad credentials") ==
        "Kafka refused the login of user delayd (SASL SCRAM-SHA-512): bad credentials");
  CHECK(refusal_sentence(Refusal::authorization, who, "Write", "topic ready.pay", "Topic authorization failed") ==
        "Kafka refused Write on topic ready.pay to user delayd (SASL SCRAM-SHA-512): Topic authorization failed "
        "(an ACL is missing)");
  CHECK(refusal_sentence(Refusal::authorization, who, "", "", "denied") ==
        "Kafka refused access to user delayd (SASL SCRAM-SHA-512): denied (an ACL is missing)");
}
