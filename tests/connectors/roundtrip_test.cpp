// A record goes through the producer and the consumer unchanged: key, value and headers, with
// null, empty and binary contents kept apart, and the caller's tag comes back in the report.
#include <string>
#include <vector>

#include "kafka_test_support.hpp"

using namespace delayd::connectors;
using namespace delayd::connectors::test;

TEST_CASE("a record with key, value and headers comes back unchanged in a fresh group", "[kafka]") {
  const std::string topic = create_topic("roundtrip", 1);

  OutRecord full;
  full.topic = topic;
  full.key = std::string("job-1\0tail", 10);
  full.value = std::string("{\"body\":\0\xff}", 11);
  full.headers = {{"deliver-at", "1767225600000"},
                  {"null-valued", std::nullopt},
                  {"empty-valued", ""},
                  {"binary", std::string("\0\x01\xfe\xff\0", 5)},
                  {"deliver-at", "a repeated name keeps its place"}};
  full.tag = 42;

  OutRecord nulls;  // null key, null value, no headers
  nulls.topic = topic;
  nulls.tag = 43;

  OutRecord empties;  // empty key and value are not null ones
  empties.topic = topic;
  empties.key = "";
  empties.value = "";
  empties.tag = 44;

  std::vector<DeliveryReport> reports;
  {
    KafkaProducer producer(base_props(), [&](const DeliveryReport& r) { reports.push_back(r); });
    producer.produce(full);
    producer.produce(nulls);
    producer.produce(empties);
    CHECK(producer.outstanding() == 3);
    REQUIRE(producer.flush(15000));
    CHECK(producer.outstanding() == 0);
    CHECK_FALSE(producer.fatal_error());
  }

  REQUIRE(reports.size() == 3);
  for (std::size_t i = 0; i < reports.size(); ++i) {
    INFO("report " << i << ": " << reports[i].error);
    CHECK(reports[i].ok);
    CHECK(reports[i].error.empty());
    CHECK(reports[i].topic == topic);
    CHECK(reports[i].partition == 0);
    // One partition, one producer, idempotence on: the log keeps the produce order.
    CHECK(reports[i].tag == 42 + i);
    CHECK(reports[i].offset == reports[0].offset + static_cast<std::int64_t>(i));
  }

  {
    KafkaConsumer consumer(consumer_props(unique_name("roundtrip-group")), {});
    consumer.subscribe({topic});
    const std::vector<Record> got = consume_n(consumer, 3);
    REQUIRE(got.size() == 3);

    CHECK(got[0].topic == topic);
    CHECK(got[0].partition == 0);
    CHECK(got[0].offset == reports[0].offset);
    CHECK(got[0].timestamp_ms > 0);
    // The report knows the timestamp the record was written with (delayctl derives job-ids from it).
    CHECK(reports[0].timestamp_ms == got[0].timestamp_ms);
    CHECK(got[0].key == full.key);
    CHECK(got[0].value == full.value);
    CHECK(got[0].headers == full.headers);
    const auto* null_valued = find_header(got[0].headers, "null-valued");
    REQUIRE(null_valued != nullptr);
    CHECK_FALSE(null_valued->has_value());
    CHECK(find_header(got[0].headers, "absent") == nullptr);

    CHECK(got[1].offset == reports[1].offset);
    CHECK_FALSE(got[1].key.has_value());
    CHECK_FALSE(got[1].value.has_value());
    CHECK(got[1].headers.empty());

    CHECK(got[2].offset == reports[2].offset);
    REQUIRE(got[2].key.has_value());
    CHECK(got[2].key->empty());
    REQUIRE(got[2].value.has_value());
    CHECK(got[2].value->empty());

    consumer.close();
  }
  require_all_clients_destroyed();
}
