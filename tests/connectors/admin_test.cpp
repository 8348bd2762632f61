// Topic creation: idempotent, reports what exists, and names the topic when it cannot help.
// A group's members: as its coordinator sees them, with the ids the version interlock and the
// ingest stage's lone-member check compare.
#include <chrono>
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
    const auto asked = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(admin.group_members("anything", 1000), KafkaError);
    CHECK(std::chrono::steady_clock::now() - asked < std::chrono::seconds(3));
  }
  require_all_clients_destroyed();
}

TEST_CASE("group_members lists each member with its client id and member id, and none for a group unknown", "[kafka]") {
  {
    const std::string topic = create_topic("members", 2);
    const std::string group = unique_name("members");
    KafkaAdmin admin(base_props());
    CHECK(admin.group_members(unique_name("members-none")).empty());

    Properties props = consumer_props(group);
    props.emplace_back("client.id", "members-test-client");
    bool assigned = false;
    KafkaConsumer consumer(props, {[&](const std::vector<TopicPartition>& tps) { assigned = !tps.empty(); }, {}, {}});
    consumer.subscribe({topic});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!assigned && std::chrono::steady_clock::now() < deadline) consumer.poll_batch(10, 200);
    REQUIRE(assigned);

    const auto members = admin.group_members(group);
    REQUIRE(members.size() == 1);
    CHECK(members[0].client_id == "members-test-client");
    CHECK(members[0].member_id == consumer.member_id());
    CHECK_FALSE(members[0].host.empty());
    consumer.close();
  }
  require_all_clients_destroyed();
}
