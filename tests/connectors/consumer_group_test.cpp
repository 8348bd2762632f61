// Consumer group behaviour the broker relies on: offsets are committed only as told, a new
// member resumes after them, and the listener hears of every assignment and revocation.
#include <algorithm>
#include <string>
#include <vector>

#include "kafka_test_support.hpp"

using namespace delayd::connectors;
using namespace delayd::connectors::test;

namespace {

struct ListenerLog {
  std::vector<std::vector<TopicPartition>> assigned;
  std::vector<std::vector<TopicPartition>> revoked;

  KafkaConsumer::Listener listener() {
    return {[this](const std::vector<TopicPartition>& tps) { assigned.push_back(tps); },
            [this](const std::vector<TopicPartition>& tps) { revoked.push_back(tps); },
            {}};  // a loss is heard as a revoke
  }
};

void produce_to(const std::string& topic, const std::vector<std::pair<int, std::string>>& records) {
  int failed = 0;
  KafkaProducer producer(base_props(), [&](const DeliveryReport& r) { failed += r.ok ? 0 : 1; });
  for (const auto& [partition, value] : records) {
    OutRecord rec;
    rec.topic = topic;
    rec.partition = partition;
    rec.value = value;
    producer.produce(rec);
  }
  REQUIRE(producer.flush(15000));
  REQUIRE(failed == 0);
}

std::vector<std::pair<int, std::int64_t>> positions(std::vector<Record> records) {
  std::vector<std::pair<int, std::int64_t>> out;
  for (const auto& r : records) out.emplace_back(r.partition, r.offset);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("a new member of the group resumes after the committed offsets", "[kafka]") {
  const std::string topic = create_topic("group", 2);
  const std::string group = unique_name("group");
  const std::vector<TopicPartition> both{{topic, 0}, {topic, 1}};
  produce_to(topic, {{0, "p0-0"}, {0, "p0-1"}, {0, "p0-2"}, {1, "p1-0"}, {1, "p1-1"}, {1, "p1-2"}});

  SECTION("committing records") {
    ListenerLog first_log;
    {
      KafkaConsumer first(consumer_props(group), first_log.listener());
      first.subscribe({topic});
      const auto got = consume_n(first, 6);
      REQUIRE(positions(got) ==
              std::vector<std::pair<int, std::int64_t>>{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}});
      REQUIRE(first_log.assigned.size() == 1);
      CHECK(first_log.assigned[0] == both);
      CHECK(first.assignment() == both);
      CHECK(first_log.revoked.empty());

      // Done with p0@0, p0@1 and p1@0 only; the order given does not matter.
      std::vector<Record> done;
      for (const auto& r : got) {
        if ((r.partition == 0 && r.offset <= 1) || (r.partition == 1 && r.offset == 0)) done.push_back(r);
      }
      std::reverse(done.begin(), done.end());
      first.commit(done);
      first.commit(std::vector<Record>{});  // commits nothing, in particular not the position

      first.close();
      REQUIRE(first_log.revoked.size() == 1);
      CHECK(first_log.revoked[0] == both);
      first.close();  // idempotent
      CHECK(first_log.revoked.size() == 1);
      CHECK_THROWS_AS(first.poll_batch(10, 0), KafkaError);
    }

    ListenerLog second_log;
    KafkaConsumer second(consumer_props(group), second_log.listener());
    second.subscribe({topic});
    const auto rest = consume_n(second, 3);
    CHECK(positions(rest) == std::vector<std::pair<int, std::int64_t>>{{0, 2}, {1, 1}, {1, 2}});
    CHECK(second.poll_batch(10, 1000).empty());
    REQUIRE_FALSE(second_log.assigned.empty());
    CHECK(second_log.assigned.back() == both);
    second.close();
    CHECK(second_log.revoked.size() == 1);
  }

  SECTION("committing next offsets, and a destructor that leaves the group") {
    ListenerLog first_log;
    {
      KafkaConsumer first(consumer_props(group), first_log.listener());
      first.subscribe({topic});
      REQUIRE(consume_n(first, 6).size() == 6);
      first.commit({{TopicPartition{topic, 0}, 3}, {TopicPartition{topic, 1}, 2}});
    }
    CHECK(first_log.revoked.size() == 1);  // the destructor closed it

    produce_to(topic, {{0, "p0-3"}});
    KafkaConsumer second(consumer_props(group), {});
    second.subscribe({topic});
    const auto rest = consume_n(second, 2);
    CHECK(positions(rest) == std::vector<std::pair<int, std::int64_t>>{{0, 3}, {1, 2}});
    CHECK(second.poll_batch(10, 1000).empty());
  }
  require_all_clients_destroyed();
}

TEST_CASE("poll_batch respects max and its timeout", "[kafka]") {
  const std::string topic = create_topic("batch", 1);
  produce_to(topic, {{0, "a"}, {0, "b"}, {0, "c"}, {0, "d"}, {0, "e"}});
  {
    KafkaConsumer consumer(consumer_props(unique_name("batch-group")), {});
    consumer.subscribe({topic});
    CHECK(consumer.poll_batch(0, 1000).empty());
    std::vector<Record> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got.size() < 5 && std::chrono::steady_clock::now() < deadline) {
      auto batch = consumer.poll_batch(2, 200);
      CHECK(batch.size() <= 2);
      got.insert(got.end(), batch.begin(), batch.end());
    }
    REQUIRE(got.size() == 5);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i].offset == static_cast<std::int64_t>(i));

    const auto start = std::chrono::steady_clock::now();
    CHECK(consumer.poll_batch(10, 500).empty());
    const auto waited = std::chrono::steady_clock::now() - start;
    CHECK(waited >= std::chrono::milliseconds(450));
    CHECK(waited < std::chrono::seconds(5));
  }
  require_all_clients_destroyed();
}
