// KafkaAdmin: creates the topics delayd needs and reads their partition counts, because topic
// auto-creation is (and should be) off on the brokers delayd runs against.
//
// Invariants: ensure_topics() returns only when every named topic exists and every one of its
// partitions has a leader, so that a producer or consumer started right after it does not race
// topic creation. It never alters an existing topic; one whose partition count differs from the
// requested count is kept as it is, with a warning in the log (the ingest topic's partitions are
// delayd's shards, so an operator should know).
// Threading: not thread-safe; use from one thread. Holds one librdkafka client (with its
// threads) for its lifetime. Move-only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "connectors/kafka_error.hpp"

namespace delayd::connectors {

class KafkaAdmin {
 public:
  // bootstrap.servers is required; other properties (SASL, TLS, client.id ...) pass through.
  // Throws KafkaConfigError for a refused or missing property.
  explicit KafkaAdmin(const Properties& props);
  ~KafkaAdmin();
  KafkaAdmin(KafkaAdmin&&) noexcept;
  KafkaAdmin& operator=(KafkaAdmin&&) noexcept;
  KafkaAdmin(const KafkaAdmin&) = delete;
  KafkaAdmin& operator=(const KafkaAdmin&) = delete;

  // Creates those of `topics` that do not exist (one created concurrently by someone else counts
  // as success) and waits until metadata shows all of them with leaders. Throws KafkaError
  // naming the topic and librdkafka's or the broker's reason, or the timeout.
  void ensure_topics(const std::vector<std::string>& topics, int partitions, int replication_factor,
                     int timeout_ms = 30000);
  // The same, creating the missing ones with these topic configurations (e.g. retention.ms); an
  // existing topic's are left as they are.
  void ensure_topics(const std::vector<std::string>& topics, int partitions, int replication_factor,
                     const std::vector<std::pair<std::string, std::string>>& config, int timeout_ms = 30000);

  // Deletes `topics` (one that does not exist counts as deleted); returns once the controller
  // has accepted the deletion. For tools, tests and benchmarks: delayd itself never deletes.
  // Throws KafkaError naming the topic and the broker's reason, or the timeout.
  void delete_topics(const std::vector<std::string>& topics, int timeout_ms = 30000);

  // The members of a consumer group as its coordinator describes them (DescribeGroups, through
  // rd_kafka_list_groups): none for a group that has no members, or does not exist. Throws KafkaRefused when Kafka
  // refuses the login or Describe on the group, else KafkaError naming the group and the broker's
  // reason, or the timeout.
  struct GroupMember {
    std::string client_id;
    std::string host;
    std::string member_id;
  };
  std::vector<GroupMember> group_members(const std::string& group, int timeout_ms = 5000);

  // The topic's partition count from fresh cluster metadata; nullopt if the topic does not exist.
  // Throws KafkaError if the cluster cannot be asked within timeout_ms.
  std::optional<int> partition_count(const std::string& topic, int timeout_ms = 5000);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayd::connectors
