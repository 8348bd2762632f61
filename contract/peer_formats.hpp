// The record formats of two Kafka-native schedulers, read unchanged so that their users can
// point delayd at the topic they already have (docs/producing.md, "Drop-in for etf1 and Chronos"). Each
// turns one record into what parse_ingest() returns for delayd's own format; both schedule with
// latest wins (ScheduleJob::upsert), and both name the topic to deliver to rather than a
// business: their jobs' business is config::topic_business(<that topic>).
//
// etf1 (etf1/kafka-message-scheduler, a compacted schedules topic):
//   key                     the schedule id: the job-id, each byte outside 0x21-0x7E and '%'
//                           written %XX (etf1_job_id()); absent, empty or over kMaxJobIdChars
//                           once encoded: invalid
//   value                   the payload, byte for byte; null: a tombstone, i.e. cancel (one
//                           delayd wrote itself, kHeaderOwnTombstone, is Ignored)
//   scheduler-epoch         the due time, decimal seconds since the epoch (digits only)
//   scheduler-target-topic  the ready topic (legal, allowed, not one of delayd's own)
//   scheduler-target-key    the delivered record's key; absent or null: no key
// The delivered record carries every input header in its order, then scheduler-timestamp (the
// schedule record's timestamp, seconds), scheduler-key (the raw key) and scheduler-topic (the
// schedules topic), then delayd's own headers. With rules.etf1_drop_past_due, a schedule
// already past due when it was produced (epoch < timestamp - grace) is Dropped.
//
// Chronos (kindredgroup/chronos):
//   chronosMessageId  the job-id (as delayd's job-id header)
//   chronosDeadline   the due time, RFC 3339 with an offset ("Z" or +HH:MM)
//   op                delayd's extension: schedule (default), cancel, reschedule (to the
//                     chronosDeadline given)
// Delivered to rules.chronos_output_topic with the key, value and every header unchanged, in
// their order, then delayd's own headers.
//
// Pure and total like parse_ingest(): no I/O, no clock, no exception but std::bad_alloc.
// Threading: pure functions; callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "connectors/record.hpp"
#include "contract/ingest_parse.hpp"

namespace delayd::contract {

inline constexpr std::string_view kEtf1Epoch = "scheduler-epoch";
inline constexpr std::string_view kEtf1TargetTopic = "scheduler-target-topic";
inline constexpr std::string_view kEtf1TargetKey = "scheduler-target-key";
inline constexpr std::string_view kEtf1Timestamp = "scheduler-timestamp";
inline constexpr std::string_view kEtf1Key = "scheduler-key";
inline constexpr std::string_view kEtf1Topic = "scheduler-topic";
// On the tombstones delayd writes to an etf1 schedules topic: why ("fired", "dropped",
// "invalid"). delayd ignores a tombstone that has it: it reflects what delayd did, and must
// not cancel a newer schedule of the id read before it.
inline constexpr std::string_view kHeaderOwnTombstone = "delayd-tombstone";

inline constexpr std::string_view kChronosId = "chronosMessageId";
inline constexpr std::string_view kChronosDeadline = "chronosDeadline";

// The job-id of an etf1 schedule key: printable ASCII kept, every other byte and '%' as %XX.
std::string etf1_job_id(std::string_view key);

ParsedIngest parse_etf1(const connectors::Record& rec, const IngestRules& rules);
ParsedIngest parse_chronos(const connectors::Record& rec, const IngestRules& rules);

// The tombstone of the schedule keyed `key` in `partition` of the etf1 schedules topic `topic`,
// marked with kHeaderOwnTombstone = why. The partition is the schedule's own, so that it lands
// beside the schedule whatever partitioner its producer used (etf1 issue 53).
connectors::OutRecord etf1_tombstone(const std::string& topic, std::int32_t partition, std::string key,
                                     std::string_view why);

}  // namespace delayd::contract
