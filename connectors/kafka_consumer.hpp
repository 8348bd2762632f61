// KafkaConsumer: one member of a Kafka consumer group, reading records in batches and
// committing offsets only when, and exactly as far as, the caller says.
//
// Why manual commits: an ingest offset may be committed only after the job it carries is safe
// in Redis, so librdkafka must never commit or store offsets on its own. These properties are
// forced (a caller value that differs is overridden, with a warning):
//   enable.auto.commit=false, enable.auto.offset.store=false.
// Defaults the caller may override: auto.offset.reset=earliest (a fresh group reads from the
// start, so records written before the group first joined are not skipped).
// group.id and bootstrap.servers are required.
//
// Rebalances: the Listener learns of every change of ownership, on the thread that calls
// poll_batch() or close(): assigned() after the partitions are assigned, revoked() before they
// are taken away, and also when they are lost (session timeout, fencing), because in both cases
// the caller must stop treating them as its own. Both the eager protocol (librdkafka's default)
// and cooperative-sticky are handled; with cooperative, the lists are the increments.
//
// Invariants:
//   - A batch never holds a record of a partition revoked while the batch was being gathered:
//     such records are dropped (they are uncommitted, so the next owner reads them), and the
//     batch ends at the rebalance. So every record returned belongs to a partition the caller
//     was last told was assigned.
//   - commit() commits exactly the offsets derived from its argument; nothing else is committed,
//     not even at close().
//
// Threading: not thread-safe. One thread calls every method; the listener runs on it, inside
// poll_batch() and close(). librdkafka's threads only call the log hook. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "connectors/kafka_error.hpp"
#include "connectors/record.hpp"

namespace delayd::connectors {

class KafkaConsumer {
 public:
  // Either function may be empty. If one throws, the rebalance is still completed (partitions
  // are assigned or unassigned as librdkafka requires) and the exception then leaves the
  // poll_batch() or close() that ran it.
  struct Listener {
    std::function<void(const std::vector<TopicPartition>&)> assigned;
    std::function<void(const std::vector<TopicPartition>&)> revoked;
    // Partitions taken away without a revoke (the session timed out, the member was fenced, a
    // rebalance failed): another member may own them already. Empty: revoked() hears of it.
    std::function<void(const std::vector<TopicPartition>&)> lost;
  };

  // Throws KafkaConfigError for a refused or missing property.
  KafkaConsumer(const Properties& props, Listener listener);
  // Calls close(); an exception from the listener is logged, not thrown.
  ~KafkaConsumer();
  KafkaConsumer(KafkaConsumer&&) noexcept;
  KafkaConsumer& operator=(KafkaConsumer&&) noexcept;
  KafkaConsumer(const KafkaConsumer&) = delete;
  KafkaConsumer& operator=(const KafkaConsumer&) = delete;

  // Replaces the subscription. Topics that do not exist are not an error here: librdkafka logs
  // them and picks them up when they appear.
  void subscribe(const std::vector<std::string>& topics);
  // Leaves the group: the next poll_batch() serves the revoke of the whole assignment (the
  // partitions go to the other members), and the member takes part again at the next subscribe().
  void unsubscribe();

  // Waits up to timeout_ms for a first record, then takes, without waiting, what is already
  // fetched, up to `max` records (max == 0 returns at once with nothing). Rebalance callbacks
  // run inside. Non-fatal consumer errors (partition EOF, transport trouble, unknown topic) are
  // logged and skipped; a fatal one throws KafkaError (KafkaFencedMember when another member
  // joined with this one's group.instance.id), at this call and every later one.
  std::vector<Record> poll_batch(std::size_t max, int timeout_ms);

  // A refusal the consumer has met (kafka_error.hpp: its login failed, or an ACL on the group or
  // on a topic it reads is missing), as the one sentence that names it, until the group has
  // assigned partitions to it or a record has come since; nullopt otherwise. Such errors are not
  // logged at each retry: the caller reports this as an outage, once.
  std::optional<std::string> refusal() const;

  // Synchronously commits, for each partition among `records`, the offset after the highest
  // record given. An empty list commits nothing. Throws KafkaError if the commit, or any
  // partition of it, fails (for example after the partition was revoked).
  void commit(const std::vector<Record>& records);
  // The same, with the next offset to read given per partition.
  void commit(const std::vector<std::pair<TopicPartition, std::int64_t>>& next_offsets);

  // Starts committing these offsets and returns at once (a thread that must not block uses it);
  // a failure is logged when its result is served by a later poll_batch(), never thrown: the
  // records are then read again, which callers must tolerate (delayd's ingest is idempotent).
  void commit_async(const std::vector<std::pair<TopicPartition, std::int64_t>>& next_offsets);

  // Pauses (or resumes) fetching for every partition currently assigned, while poll_batch()
  // keeps the membership alive. Partitions assigned later start unpaused: call it again after a
  // rebalance to keep a pause in force.
  void set_paused(bool paused);

  // The partitions currently assigned to this member.
  std::vector<TopicPartition> assignment() const;
  // The member id the group's coordinator gave this consumer at its last join; empty before one.
  std::string member_id() const;

  // Records of each assigned partition not read yet: the high watermark librdkafka last saw
  // (from its fetch responses, so no request is made) less this member's position. Partitions
  // whose position or watermark is not known yet are left out. Cheap: call it every second.
  std::map<TopicPartition, std::int64_t> lag() const;

  // Leaves the group cleanly: revoked() is called for the current assignment, nothing is
  // committed. Idempotent; after it, the other methods throw KafkaError.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayd::connectors
