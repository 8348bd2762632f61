// Loop settings: from delayd's configuration to the options of each part of the scheduling
// loop, and the defaults delayd chooses for its librdkafka clients (the tuning).
//
// Owns the tuning of the loop's producer and consumer (each default explained where it is set)
// and the translation of config::Config into SchedulerOptions, FireOptions and IngestOptions.
// Invariants: a user's kafka.* passthrough property always wins over delayd's default (it is
// applied after); nothing here does I/O or keeps state.
// Threading: pure functions, called while the loop is built.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "broker/fire_path.hpp"
#include "broker/ingest_path.hpp"
#include "broker/ownership.hpp"
#include "broker/record_sink.hpp"
#include "broker/scheduler.hpp"
#include "config/config.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_producer.hpp"

namespace delayd::broker {

// The ready and dead-letter producer's properties: delayd's defaults, then the user's.
connectors::Properties producer_properties(const config::Config& c);
// The linger.ms that `props` (producer_properties()) give the producer: the last of linger.ms
// and its alias queue.buffering.max.ms, librdkafka's 5 ms if neither is set, zero if the value
// is not a number (the producer refuses it).
std::chrono::microseconds producer_linger(const connectors::Properties& props);
// The properties of the consumer of one of delayd's groups (config::consumer_groups()): delayd's
// defaults, then the user's, then the group's id.
connectors::Properties consumer_properties(const config::Config& c, const config::ConsumerGroup& group);
// True when delayd's groups rebalance cooperatively: the consumers' partition.assignment.strategy
// (cooperative-sticky unless the user sets another) names cooperative-sticky.
bool cooperative_rebalancing(const config::Config& c);
// The wheel's geometry and the scheduler's batches, from wheel.* and scheduler.*.
SchedulerOptions scheduler_options(const config::Config& c);
// The fire path's options; `clock` is the loop's wall clock, `recreate_topic` is asked for a
// missing ready topic when kafka.create_topics is on (ignored otherwise); `tracer` (null: off)
// gets the publish spans.
FireOptions fire_options(const config::Config& c, std::function<std::int64_t()> clock,
                         std::function<void(const std::string&)> recreate_topic, telemetry::Tracer* tracer);
// The record sink kafka.delivery asks for (broker/record_sink.hpp): ShardTransactions for
// exactly_once, IdempotentSink for at_least_once; every report goes to `on_report`.
std::unique_ptr<RecordSink> make_record_sink(const config::Config& c,
                                             connectors::KafkaProducer::ReportHandler on_report);
// A shard's transactional producer's properties (exactly_once): the ready producer's, with the
// shard's transactional.id, transaction.timeout.ms 10 s unless the user sets it (an abandoned
// transaction holds read_committed consumers of its partitions back this long),
// message.timeout.ms no longer than that (librdkafka requires it), and linger.ms
// kafka.transaction_linger_ms when that is set and the user does not set linger.ms (the records
// leave at the commit).
connectors::Properties transactional_properties(const config::Config& c, const std::string& shard);
// Ownership's options: the shards' topics, whether a takeover reads the delivery log, and when a
// shard given up by a fence is taken again (the consumers' session timeout and 2 s).
Ownership::Options ownership_options(const config::Config& c);
// The ingest path's options; `redis` is the client the store writes through (WAIT is sent on it);
// `tracer` (null: off) gets the accept spans.
IngestOptions ingest_options(const config::Config& c, redis::RedisClient& redis, telemetry::Tracer* tracer);

}  // namespace delayd::broker
