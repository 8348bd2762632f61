// The delivery log: what each shard's transactions delivered, written in the same transactions
// (kafka.delivery = exactly_once; broker/shard_transactions.hpp has the design).
//
// Each ingest topic T has a log topic T.delivered (config::delivery_log_topic()) with as many
// partitions; shard T:p logs into its partition p, and only the shard's transactional producer
// writes there. One record per job record a transaction carries:
//
//   record of the transaction        log record (key: the job-id)     the takeover then
//   ready record, attempt a          "ready <a>"                      settles the job as
//                                                                     delivered, attempt a
//   ready record of a repeat's       "ready <a>/<r>"                  the same, if occurrence r
//   occurrence r, attempt a                                           is the one in flight
//   dead-letter copy of a job, a     "dead <a>[/<r>] <reason>"        settles it as failed
//   etf1 tombstone, history copy     none (they ride with the ready record of their job)
//
// Every occurrence of a repeat is attempt 1, so the attempt alone cannot tell the occurrence in
// flight from one delivered before it: a takeover that did so settled an occurrence whose
// transaction a kill -9 had aborted, and it was never delivered (found by bench/run-scale.sh's
// soak). A log record written before the occurrence was logged ("ready <a>" for a repeat) names
// no occurrence and matches none: that job is produced again (a duplicate, never a loss).
//
// A log record is visible to a read_committed reader exactly when the transaction that carried
// it committed, so reading a shard's log partition to its end, once the shard's producer has
// been initialised by its new owner (which completes or aborts every earlier transaction of the
// shard), tells for each in-flight entry whether its record reached Kafka.
// Invariants: log_record() of a record without a job-id and attempt header is nullopt (such a
// record is no job's: nothing to log); parse_log_record() of a record log_record() made gives back
// what it was made from; anything else parses to nullopt (never throws).
// Threading: pure functions, and read_delivery_log() on whatever thread owns the reader.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "broker/delivery_tags.hpp"
#include "connectors/record.hpp"
#include "connectors/topic_reader.hpp"

namespace delayd::broker {

struct LoggedDelivery {
  enum class Kind : unsigned char { ready, dead };
  std::string job_id;
  int attempt = 0;
  int repeat = 0;  // a repeat's occurrence (its ready record's `repeat` header); 0: none named
  Kind kind = Kind::ready;
  std::string reason;  // dead: the dead letter's reason
  bool operator==(const LoggedDelivery&) const = default;
};

// The log record for `rec`, a record of kind `kind` (its tag's) of a job, to the log partition
// `partition` of `topic`; nullopt when `rec` is no job's ready record or dead-letter copy.
std::optional<connectors::OutRecord> log_record(const connectors::OutRecord& rec, TagKind kind,
                                                const std::string& topic, std::int32_t partition);

// What a log record says; nullopt for a record that is not one.
std::optional<LoggedDelivery> parse_log_record(const connectors::Record& rec);

// Every delivery logged in `topic`'s partition `partition` from the first record at or after
// since_ms (a log record is written after its job's claim, so since_ms is the oldest in-flight
// entry's firing_at) to the partition's end, as committed transactions left it. `reader` must
// read committed records only (librdkafka's default). Throws KafkaError when Kafka does not
// answer within timeout_ms for a step.
std::vector<LoggedDelivery> read_delivery_log(connectors::TopicReader& reader, const std::string& topic,
                                              std::int32_t partition, std::int64_t since_ms, int timeout_ms);

}  // namespace delayd::broker
