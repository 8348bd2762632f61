#include "broker/loop_settings.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "broker/shard_transactions.hpp"
#include "broker/version_interlock.hpp"
#include "config/business_policy.hpp"
#include "connectors/rdkafka_config.hpp"
#include "contract/ingest_parse.hpp"
#include "storage/key_schema.hpp"

namespace delayd::broker {

using connectors::with_defaults;

namespace {

// producer_properties() with `linger_ms` as delayd's default for linger.ms.
connectors::Properties producer_properties_lingering(const config::Config& c, std::int64_t linger_ms) {
  // Batches for the load, and a kick for a lone record: linger.ms 5 (librdkafka's own default)
  // lets records produced within 5 ms leave in one request: at 10 000 jobs a second about 40 %
  // fewer TCP segments to Kafka than linger.ms 1, which on a machine short of CPU keeps jobs
  // from being late (docs/performance/history-2026-11-29.md, "Five milliseconds of linger, and
  // a kick"). A record produced when nothing follows does not wait it out: the loop kicks the
  // producer when it is about to sleep (linger_kick.hpp). Not 0: then the idempotent
  // producer's broker thread polls without sleeping while its five requests are in flight
  // ("One millisecond of linger").
  // batch.num.messages 10000 lets one request carry a whole turn's records (100 000 due in 2 s
  // is 5 000 per 100 ms).
  // reconnect.backoff.max.ms 1000 (librdkafka: 10 s): after a broker restart, records go
  // out within a second of the broker being back. Every one of these may be overridden.
  return with_client_id(with_defaults(
      {{"linger.ms", std::to_string(linger_ms)}, {"batch.num.messages", "10000"}, {"reconnect.backoff.max.ms", "1000"}},
      config::kafka_properties(c, config::KafkaClient::producer)));
}

}  // namespace

connectors::Properties producer_properties(const config::Config& c) { return producer_properties_lingering(c, 5); }

std::chrono::microseconds producer_linger(const connectors::Properties& props) {
  // The last setting wins, under either of librdkafka's names for it (a float of milliseconds).
  const std::optional<std::string> value = connectors::find_property(props, "linger.ms");
  if (!value) return std::chrono::milliseconds(5);  // librdkafka's default
  try {
    return std::chrono::microseconds(static_cast<std::int64_t>(std::stod(*value) * 1000.0));
  } catch (const std::exception&) {
    return std::chrono::microseconds::zero();  // librdkafka refuses it when the producer is made
  }
}

connectors::Properties consumer_properties(const config::Config& c, const config::ConsumerGroup& group) {
  // cooperative-sticky: a member joining or leaving moves only the partitions that must
  // move; the others keep firing through the rebalance (KafkaConsumer handles both
  // protocols, so a user may still choose another strategy).
  // fetch.min.bytes 8192 and fetch.wait.max.ms 10 (librdkafka: 1 and 500): librdkafka keeps
  // one fetch in flight per broker, and the broker holds it until its partitions have
  // fetch.min.bytes of records or the wait ends. With 1 byte, a fetch came back with each
  // record or two at moderate rates, and each woke the broker thread, the ingest thread, its
  // Redis batch and the loop: at 2 000 jobs/s, at_least_once, 8 KiB (about twenty 400-byte
  // records) cut delayd's CPU a job by a third, Kafka's by a fifth, Redis's by a tenth
  // (docs/performance/cost.md, "Fetching in batches"). The wait bounds what a record may wait for
  // others: 10 ms at most, where a job due 20 ms after it was published still fires on time.
  // It also bounds how long partitions assigned at a start or a rebalance wait behind the
  // fetch in flight (with 500, records published right after a start reached delayd up to
  // 600 ms late), and what an idle consumer asks: 100 empty fetches a second per broker. The
  // status topic's group waits 50 ms: a report is not due at an instant (an ack deadline is
  // seconds away), and its idle fetches are then 20 a second.
  // group.id: the configuration refuses it as a passthrough property, so it is only ever this.
  connectors::Properties props = with_defaults({{"session.timeout.ms", "10000"},
                                                {"heartbeat.interval.ms", "2000"},
                                                {"fetch.min.bytes", "8192"},
                                                {"fetch.wait.max.ms", group.reports ? "50" : "10"},
                                                {"reconnect.backoff.max.ms", "1000"},
                                                {"partition.assignment.strategy", "cooperative-sticky"}},
                                               config::kafka_properties(c, config::KafkaClient::consumer));
  for (auto& [name, value] : props) {
    if (name == "group.id") value = group.group_id;
  }
  // Static membership (ingest_stage.hpp): the same id in each of the instance's groups, where it
  // is unique among that group's members as long as it is unique among the instances.
  if (!c.kafka.group_instance_id.empty()) props.emplace_back("group.instance.id", c.kafka.group_instance_id);
  // The member names its version and layout to the others (broker/version_interlock.hpp).
  return with_client_id(std::move(props));
}

bool cooperative_rebalancing(const config::Config& c) {
  const std::optional<std::string> strategy =
      connectors::find_property(consumer_properties(c, config::ConsumerGroup{}), "partition.assignment.strategy");
  return strategy && strategy->find("cooperative-sticky") != std::string::npos;
}

connectors::Properties transactional_properties(const config::Config& c, const std::string& shard) {
  // With kafka.transaction_linger_ms, linger.ms as long (unless the user sets it): a lingering
  // transaction's records are not visible before its commit, so sending them sooner than the
  // commit only makes more requests; and with five of a partition's requests in flight (the
  // idempotent producer's most) when the commit flushes, librdkafka's broker thread polls
  // without sleeping until Kafka answers one (a flush asks it to wake at once while records
  // wait), taking a core from Kafka on a small machine. At 5 000 jobs/s with a linger of 20 ms:
  // p99 17-148 ms against 226-348 with linger.ms 5, delayd's CPU a job down by a quarter
  // (docs/performance/cost.md, "The linger's records sent at its commit").
  const std::int64_t linger_ms = c.kafka.transaction_linger_ms > 0 ? c.kafka.transaction_linger_ms : 5;
  connectors::Properties props =
      with_defaults({{"transaction.timeout.ms", "10000"}}, producer_properties_lingering(c, linger_ms));
  props.emplace_back("transactional.id", config::transactional_id(c, shard));
  std::int64_t txn_ms = 10000;
  try {
    txn_ms = std::stoll(connectors::find_property(props, "transaction.timeout.ms").value_or("10000"));
  } catch (const std::exception&) {
    // librdkafka refuses it when the producer is made, naming the property
  }
  if (c.kafka.message_timeout_ms > txn_ms) props.emplace_back("message.timeout.ms", std::to_string(txn_ms));
  return props;
}

std::unique_ptr<RecordSink> make_record_sink(const config::Config& c,
                                             connectors::KafkaProducer::ReportHandler on_report) {
  if (config::delivery_mode(c) == config::DeliveryMode::at_least_once) {
    return std::make_unique<IdempotentSink>(producer_properties(c), std::move(on_report));
  }
  ShardTransactions::Options o;
  o.producer = [&c](const std::string& shard) { return transactional_properties(c, shard); };
  o.reader = config::kafka_properties(c, config::KafkaClient::consumer);
  o.linger_ms = c.kafka.transaction_linger_ms;
  o.late_linger_ms = c.kafka.transaction_late_linger_ms;
  std::vector<std::string> topics;
  for (const auto& t : config::ingest_topics(c)) topics.push_back(t.topic);
  o.log_of = [topics](const std::string& shard) -> std::pair<std::string, std::int32_t> {
    for (const auto& t : topics) {
      if (auto p = storage::partition_of(shard, t)) return {config::delivery_log_topic(t), *p};
    }
    return {config::delivery_log_topic(shard), 0};  // not a shard of ours: its opening fails, naming it
  };
  return std::make_unique<ShardTransactions>(std::move(o), std::move(on_report));
}

Ownership::Options ownership_options(const config::Config& c) {
  Ownership::Options o;
  o.ingest_topics = contract::ingest_rules(c).ingest_topics;
  o.takeover_reads = config::delivery_mode(c) == config::DeliveryMode::exactly_once;
  std::int64_t session_ms = 10000;
  const auto groups = config::consumer_groups(c);
  if (!groups.empty()) {
    try {
      session_ms = std::stoll(
          connectors::find_property(consumer_properties(c, groups.front()), "session.timeout.ms").value_or("10000"));
    } catch (const std::exception&) {
      // the consumer refuses it, naming the property
    }
  }
  o.retake_after = std::chrono::milliseconds(session_ms + 2000);
  return o;
}

SchedulerOptions scheduler_options(const config::Config& c) {
  SchedulerOptions so;
  so.wheel.tick = static_cast<std::uint64_t>(c.wheel.tick_ms);
  so.wheel.slot_bits = static_cast<unsigned>(c.wheel.slot_bits);
  so.load_window_ms = c.scheduler.load_window_ms;
  so.load_batch = static_cast<std::size_t>(c.scheduler.load_batch);
  so.fire_batch = static_cast<std::size_t>(c.scheduler.fire_batch);
  return so;
}

FireOptions fire_options(const config::Config& c, std::function<std::int64_t()> clock,
                         std::function<void(const std::string&)> recreate_topic, telemetry::Tracer* tracer) {
  FireOptions o{.max_attempts = static_cast<int>(c.scheduler.max_attempts),
                .retry_backoff_ms = c.scheduler.retry_backoff_ms,
                .retry_backoff_max_ms = c.scheduler.retry_backoff_max_ms,
                .max_catchup = c.scheduler.max_catchup,
                .dlq_topic = c.kafka.dlq_topic,
                .ready_topic_template = c.kafka.ready_topic_template,
                .claim_ahead_ms = c.scheduler.claim_ahead_ms,
                .claim_gather_ms = c.scheduler.claim_gather_ms,
                .clock = std::move(clock),
                .fence_recheck = std::chrono::milliseconds(1000),
                .policies = config::BusinessPolicies(c),
                .missing_topic_timeout = std::chrono::milliseconds(c.kafka.missing_topic_timeout_ms),
                .on_missing_topic = c.kafka.create_topics ? std::move(recreate_topic) : nullptr,
                .etf1_tombstone_topics = {},
                .etf1_history_topic = c.etf1.history_topic,
                .follow_ups_with_record = config::delivery_mode(c) == config::DeliveryMode::exactly_once,
                .tracer = tracer};
  for (const auto& t : config::ingest_topics(c)) {
    if (t.format == config::IngestFormat::etf1 && c.etf1.tombstone_on_fire) o.etf1_tombstone_topics.insert(t.topic);
  }
  return o;
}

IngestOptions ingest_options(const config::Config& c, redis::RedisClient& redis, telemetry::Tracer* tracer) {
  IngestOptions io;
  io.tracer = tracer;
  io.wait_on = &redis;
  io.wait_replicas = static_cast<int>(c.redis.wait_replicas);
  io.wait_timeout_ms = static_cast<int>(c.redis.wait_timeout_ms);
  io.rules = contract::ingest_rules(c);
  for (const auto& t : config::ingest_topics(c)) io.formats[t.topic] = t.format;
  io.dlq_topic = c.kafka.dlq_topic;
  io.cancel_memory_s = c.scheduler.cancel_memory_s;
  io.status_topic = c.kafka.status_topic;
  io.policies = config::BusinessPolicies(c);
  return io;
}

}  // namespace delayd::broker
