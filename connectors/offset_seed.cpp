#include "connectors/offset_seed.hpp"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {

namespace {

using PartitionPtr = std::unique_ptr<RdKafka::TopicPartition>;

// A consumer that never joins its group: it only asks for and commits offsets.
struct Outsider {
  Outsider(const Properties& props, const std::string& group)
      : events("kafka offset seed group=" + group, principal_of(props)) {
    Properties effective = props;
    for (auto& [name, value] : effective) {
      if (name == "group.id") value = group;  // the source group is asked with the target's properties
    }
    effective.emplace_back("group.id", group);
    effective =
        with_forced(std::move(effective), {{"enable.auto.commit", "false"}, {"enable.auto.offset.store", "false"}},
                    "kafka offset seed");
    require_property(effective, {"bootstrap.servers", "metadata.broker.list"});
    auto conf = make_conf(effective);
    std::string errstr;
    if (conf->set("event_cb", static_cast<RdKafka::EventCb*>(&events), errstr) != RdKafka::Conf::CONF_OK) {
      throw KafkaError("kafka offset seed callbacks: " + errstr);
    }
    consumer.reset(RdKafka::KafkaConsumer::create(conf.get(), errstr));
    if (!consumer) throw KafkaConfigError("", "", errstr);
  }
  ~Outsider() {
    if (consumer) consumer->close();
  }
  Outsider(const Outsider&) = delete;
  Outsider& operator=(const Outsider&) = delete;

  LogEventBridge events;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;  // last: destroyed first
};

// The group's committed offset of each partition (negative: none).
std::vector<PartitionPtr> committed(RdKafka::KafkaConsumer& c, const std::string& principal, const std::string& group,
                                    const std::string& topic, int partitions, int timeout_ms) {
  std::vector<PartitionPtr> owned;
  std::vector<RdKafka::TopicPartition*> raw;
  for (int p = 0; p < partitions; ++p) {
    owned.emplace_back(RdKafka::TopicPartition::create(topic, p));
    raw.push_back(owned.back().get());
  }
  const RdKafka::ErrorCode err = c.committed(raw, timeout_ms);
  if (const Refusal kind = refusal_of(static_cast<int>(err)); kind != Refusal::none) {
    throw KafkaRefused(refusal_sentence(kind, principal, "Read", "group " + group, RdKafka::err2str(err)));
  }
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka offset seed: committed offsets of group " + group + " on " + topic + ": " +
                     RdKafka::err2str(err));
  }
  return owned;
}

bool any_committed(const std::vector<PartitionPtr>& offsets) {
  for (const auto& tp : offsets) {
    if (tp->err() == RdKafka::ERR_NO_ERROR && tp->offset() >= 0) return true;
  }
  return false;
}

// The commit errors that mean "the group has members now".
bool group_has_members(RdKafka::ErrorCode err) {
  return err == RdKafka::ERR_UNKNOWN_MEMBER_ID || err == RdKafka::ERR_ILLEGAL_GENERATION ||
         err == RdKafka::ERR_REBALANCE_IN_PROGRESS || err == RdKafka::ERR_FENCED_INSTANCE_ID;
}

}  // namespace

SeedOutcome seed_offsets(const Properties& props, const std::string& from_group, const std::string& topic,
                         std::chrono::milliseconds timeout) {
  const int ms = static_cast<int>(timeout.count());
  const std::string to_group = find_property(props, "group.id").value_or("");
  if (to_group.empty()) throw KafkaConfigError("group.id", "", "the group to seed must be named");
  const std::string principal = principal_of(props);
  SeedOutcome out;
  Outsider target(props, to_group);
  std::optional<int> partitions;
  try {
    partitions = partition_count(*target.consumer, topic, ms, "kafka offset seed", principal);
  } catch (const KafkaRefused&) {
    throw;
  } catch (const KafkaError&) {
    // A refused login shows as a transport failure here, and as an error event: served by a
    // consume() of nothing, it is said as the refusal it is.
    const std::unique_ptr<RdKafka::Message> none(target.consumer->consume(0));
    if (const auto refusal = target.events.refusal()) throw KafkaRefused(*refusal);
    throw;
  }
  if (!partitions) return out;
  if (any_committed(committed(*target.consumer, principal, to_group, topic, *partitions, ms))) {
    out.kind = SeedOutcome::Kind::had_own;
    return out;
  }
  std::vector<PartitionPtr> source;
  {
    Outsider from(props, from_group);
    source = committed(*from.consumer, principal, from_group, topic, *partitions, ms);
  }
  std::vector<RdKafka::TopicPartition*> copy;
  for (const auto& tp : source) {
    if (tp->err() == RdKafka::ERR_NO_ERROR && tp->offset() >= 0) copy.push_back(tp.get());
  }
  if (copy.empty()) {
    out.kind = SeedOutcome::Kind::nothing_to_copy;
    return out;
  }
  RdKafka::ErrorCode err = target.consumer->commitSync(copy);
  for (const auto* tp : copy) {
    if (err == RdKafka::ERR_NO_ERROR && tp->err() != RdKafka::ERR_NO_ERROR) err = tp->err();
  }
  if (const Refusal kind = refusal_of(static_cast<int>(err)); kind != Refusal::none) {
    throw KafkaRefused(refusal_sentence(kind, principal, "Read", "group " + to_group, RdKafka::err2str(err)));
  }
  if (group_has_members(err)) {
    out.kind = SeedOutcome::Kind::group_active;
    return out;
  }
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka offset seed: committing group " + from_group + "'s offsets of " + topic + " for group " +
                     to_group + ": " + RdKafka::err2str(err));
  }
  out.kind = SeedOutcome::Kind::seeded;
  out.partitions = copy.size();
  return out;
}

}  // namespace delayd::connectors
