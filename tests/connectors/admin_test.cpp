// Topic creation: idempotent, reports what exists, and names the topic when it cannot help.
#include <string>

#include "kafka_test_support.hpp"

using namespace delayd::connectors;
using namespace delayd::connectors::test;

TEST_CASE("ensure_topics is idempotent and partition_count reports what was created", "[kafka]") {
  {
    KafkaAdmin admin(base_props());
    const std::string first = unique_name("admin-first");
    const std::string second = unique_name("admin-second");

    CHECK_FALSE(admin.partition_count(first).has_value());
    admin.ensure_topics({first}, 3, 1);
    CHECK(admin.partition_count(first) == 3);

    REQUIRE_NOTHROW(admin.ensure_topics({first}, 3, 1));
    CHECK(admin.partition_count(first) == 3);

    // An existing topic is left as it is; only the missing one is created.
    REQUIRE_NOTHROW(admin.ensure_topics({first, second}, 2, 1));
    CHECK(admin.partition_count(first) == 3);
    CHECK(admin.partition_count(second) == 2);
  }
  require_all_clients_destroyed();
}

TEST_CASE("ensure_topics names the topic it cannot create", "[kafka]") {
  {
    KafkaAdmin admin(base_props());
    const std::string topic = unique_name("admin-impossible");
    // The stack has a single broker.
    try {
      admin.ensure_topics({topic}, 1, 3, 10000);
      FAIL("ensure_topics accepted a replication factor the cluster cannot have");
    } catch (const KafkaError& e) {
      CHECK_THAT(e.what(), Catch::Contains(topic));
      CHECK_THAT(e.what(), Catch::Contains("eplication"));
    }
    CHECK_FALSE(admin.partition_count(topic).has_value());
  }
  require_all_clients_destroyed();
}

TEST_CASE("an unreachable cluster gives KafkaError within the timeout", "[kafka]") {
  {
    KafkaAdmin admin({{"bootstrap.servers", "127.0.0.1:1"}, {"log_level", "0"}});
    CHECK_THROWS_AS(admin.partition_count("anything", 1000), KafkaError);
    CHECK_THROWS_AS(admin.ensure_topics({"anything"}, 1, 1, 1000), KafkaError);
  }
  require_all_clients_destroyed();
}
