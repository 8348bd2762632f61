// seed_offsets (connectors/offset_seed.hpp): a group that has committed nothing for a topic starts
// where another group left it, once, and never over offsets of its own or a group with members.
#include "connectors/offset_seed.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "kafka_test_support.hpp"

using namespace delayd::connectors;
using namespace delayd::connectors::test;

namespace {

void produce_to(const std::string& topic, int partition, int n) {
  int failed = 0;
  KafkaProducer producer(base_props(), [&](const DeliveryReport& r) { failed += r.ok ? 0 : 1; });
  for (int i = 0; i < n; ++i) {
    OutRecord rec;
    rec.topic = topic;
    rec.partition = partition;
    rec.value = "v" + std::to_string(i);
    producer.produce(rec);
  }
  REQUIRE(producer.flush(15000));
  REQUIRE(failed == 0);
}

// What a member of `group` reads first of each partition, as (partition, offset).
std::vector<std::pair<int, std::int64_t>> first_read(const std::string& group, const std::string& topic,
                                                     std::size_t want) {
  KafkaConsumer c(consumer_props(group), {});
  c.subscribe({topic});
  std::vector<std::pair<int, std::int64_t>> out;
  for (const auto& r : consume_n(c, want)) out.emplace_back(r.partition, r.offset);
  std::sort(out.begin(), out.end());
  c.close();
  return out;
}

}  // namespace

TEST_CASE("a new group starts where the old one left a topic, once", "[kafka]") {
  const std::string topic = create_topic("seed", 2);
  const std::string old_group = unique_name("seed-old");
  const std::string new_group = unique_name("seed-new");
  produce_to(topic, 0, 5);
  produce_to(topic, 1, 5);
  {  // the old group read and committed 3 of partition 0 and 4 of partition 1
    KafkaConsumer old(consumer_props(old_group), {});
    old.commit(std::vector<std::pair<TopicPartition, std::int64_t>>{{{topic, 0}, 3}, {{topic, 1}, 4}});
    old.close();
  }

  const SeedOutcome seeded = seed_offsets(consumer_props(new_group), old_group, topic);
  CHECK(seeded.kind == SeedOutcome::Kind::seeded);
  CHECK(seeded.partitions == 2);
  // The new group reads on after the old group's offsets: 2 of partition 0, 1 of partition 1.
  CHECK(first_read(new_group, topic, 3) == std::vector<std::pair<int, std::int64_t>>{{0, 3}, {0, 4}, {1, 4}});

  // Its own offsets now exist: a second seed leaves them alone, even with the old group's moved.
  {
    KafkaConsumer old(consumer_props(old_group), {});
    old.commit(std::vector<std::pair<TopicPartition, std::int64_t>>{{{topic, 0}, 0}});
    old.close();
  }
  CHECK(seed_offsets(consumer_props(new_group), old_group, topic).kind == SeedOutcome::Kind::had_own);
  require_all_clients_destroyed();
}

TEST_CASE("seeding with nothing to copy, no topic, or a group with members changes nothing", "[kafka]") {
  const std::string topic = create_topic("seed", 1);
  produce_to(topic, 0, 2);
  const std::string old_group = unique_name("seed-old");
  const std::string new_group = unique_name("seed-new");
  CHECK(seed_offsets(consumer_props(new_group), old_group, topic).kind == SeedOutcome::Kind::nothing_to_copy);
  CHECK(seed_offsets(consumer_props(new_group), old_group, unique_name("no-such-topic")).kind ==
        SeedOutcome::Kind::no_topic);

  {
    KafkaConsumer old(consumer_props(old_group), {});
    old.commit(std::vector<std::pair<TopicPartition, std::int64_t>>{{{topic, 0}, 1}});
    old.close();
  }
  // A member of the new group is reading (from the start, as auto.offset.reset says): the seed
  // must not commit under it.
  {
    KafkaConsumer member(consumer_props(new_group), {});
    member.subscribe({topic});
    REQUIRE(consume_n(member, 2).size() == 2);
    CHECK(seed_offsets(consumer_props(new_group), old_group, topic).kind == SeedOutcome::Kind::group_active);
  }
  require_all_clients_destroyed();
}
