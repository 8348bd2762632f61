// The topics delayd reads and the consumer groups it reads them in.
//
// Every ingest topic's partitions are shards (storage/key_schema.hpp), and the status topic's
// partitions carry consumers' reports. Each of these topics is read in a consumer group of its
// own, so that the group's assignor, which balances the number of partitions per member and
// knows nothing of topics, spreads each topic's partitions over the instances within one of
// each other (docs/operating/scaling.md, "How the work spreads"). One group reading several
// topics could give one instance every partition of one topic and another every partition of
// the other: one instance firing every job while the other idles.
//
//   topic                          group                         before 0.4 (seed_from)
//   kafka.ingest_topic             kafka.group_id                the same group
//   each other ingest topic T      <kafka.group_id>.<T>          kafka.group_id
//   kafka.status_topic S           <kafka.group_id>.<S>          kafka.group_id
//
// Up to 0.3 one group read them all; a group of 0.4 that has committed nothing for its topic yet
// starts from the offsets that group committed (connectors/offset_seed.hpp), so that an upgrade
// reads nothing twice and skips nothing.
// Threading: pure functions of a Config.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayd::config {

struct Config;

// The formats an ingest topic can hold (kafka.ingest_topics).
enum class IngestFormat : unsigned char { delayd, etf1, chronos };
constexpr std::string_view to_string(IngestFormat f) {
  switch (f) {
    case IngestFormat::delayd:
      return "delayd";
    case IngestFormat::etf1:
      return "etf1";
    case IngestFormat::chronos:
      return "chronos";
  }
  return "?";
}
// The format a name says (to_string()'s inverse); nullopt for any other name.
constexpr std::optional<IngestFormat> parse_ingest_format(std::string_view name) {
  for (const IngestFormat f : {IngestFormat::delayd, IngestFormat::etf1, IngestFormat::chronos}) {
    if (to_string(f) == name) return f;
  }
  return std::nullopt;
}
struct IngestTopic {
  std::string topic;
  IngestFormat format = IngestFormat::delayd;
  bool operator==(const IngestTopic&) const = default;
};
// Every topic delayd reads jobs from, with its format: kafka.ingest_topic (delayd's format)
// first, then kafka.ingest_topics' entries in their order (one naming kafka.ingest_topic sets
// its format). Throws ConfigError for an entry that does not parse (validate_config() has
// checked a loaded Config's).
std::vector<IngestTopic> ingest_topics(const Config& config);

// One consumer group of delayd's and the one topic it reads.
struct ConsumerGroup {
  std::string group_id;
  std::string topic;
  bool reports = false;  // the status topic: reports, not shards
  // The group that read this topic before 0.4 (kafka.group_id), whose offsets this group starts
  // from while it has none of its own; empty when it is this group itself.
  std::string seed_from;
  bool operator==(const ConsumerGroup&) const = default;
};
// The groups of the table above: each ingest topic's in ingest_topics()' order, then the status
// topic's (none when kafka.status_topic is empty). Throws like ingest_topics().
std::vector<ConsumerGroup> consumer_groups(const Config& config);

// With kafka.delivery = exactly_once (broker/shard_transactions.hpp), two more names per shard:
//   the delivery log   <ingest topic>.delivered, partition p for shard <ingest topic>:p: what each
//                      transaction of the shard delivered (broker/delivery_log.hpp); as many
//                      partitions as the ingest topic
//   transactional id   <kafka.group_id>.<shard>: the shard's producer; a new owner's producer
//                      takes the id over, which fences the old owner's
std::string delivery_log_topic(std::string_view ingest_topic);
std::string transactional_id(const Config& config, std::string_view shard);

}  // namespace delayd::config
