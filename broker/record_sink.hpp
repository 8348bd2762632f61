// RecordSink: where the fire path's records go (ready records, dead-letter copies of jobs, etf1
// follow-ups), and what a change of a shard's owner does to them. Two kinds, by kafka.delivery:
//
//   IdempotentSink      at_least_once: one idempotent producer for every shard (below). A record's
//                       report says ok once Kafka has it; a crash between that and the mark in
//                       Redis delivers the job again.
//   ShardTransactions   exactly_once: a transactional producer per owned shard, whose records a
//                       read_committed consumer sees only once their transaction committed, and
//                       whose report says ok only then (broker/shard_transactions.hpp).
//
// The shard's life in a sink, as Ownership drives it (broker/ownership.hpp):
//   open(shard, earlier)   the shard's fence is taken in Redis; `earlier` are its in-flight entries
//                          claimed under an earlier epoch (another owner's, or this process's
//                          before a restart)
//   opened(shard)          polled until ready: which of `earlier` the shard's records show as
//                          delivered (the fire path settles those without producing them again)
//   produce(rec, shard)    records of the shard's jobs
//   close(shard, lost)     revoked (after a drain: flush() and the marks) or lost (taken by
//                          another member without a revoke: nothing of it may go out any more)
// Every produced record ends in exactly one report through the handler the sink was made with,
// on the thread that calls produce(), poll() or flush(); a record refused at once is reported
// inside produce().
// Threading: the scheduling loop's thread for every method (the sinks' own threads only post
// reports, and call the wake hook).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "broker/delivery_log.hpp"
#include "broker/loop_counters.hpp"
#include "broker/producer_recovery.hpp"
#include "connectors/kafka_producer.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

class RecordSink {
 public:
  virtual ~RecordSink() = default;

  // Queues `rec`, a record of `shard`'s jobs (its tag says which kind: delivery_tags.hpp); never
  // blocks. `late_ms`: how far past its due time a ready record goes (0: on time, or another
  // kind); ShardTransactions lingers longer while a shard's records go late (a backlog).
  virtual void produce(const connectors::OutRecord& rec, const std::string& shard, std::int64_t late_ms) = 0;
  // Lets the producer that will carry `shard`'s records learn `topic` ahead of its first record.
  virtual void prepare(const std::string& topic, const std::string& shard) = 0;
  // Serves reports for up to timeout_ms; returns how many were served.
  virtual int poll(int timeout_ms) = 0;
  // Waits up to timeout_ms until every record produced so far is reported (serving the
  // reports); true when none is outstanding.
  virtual bool flush(int timeout_ms) = 0;
  // Records accepted by produce() so far (never decreases).
  virtual std::uint64_t produced() const = 0;
  // Whether records wait for a linger (the loop kicks them out when it is about to sleep:
  // linger_kick.hpp).
  virtual bool lingers() const = 0;
  // Calls `wake` from any thread when reports wait to be served; empty: none.
  virtual void on_reports_queued(std::function<void()> wake) = 0;
  // False when the sink can do nothing any more (the error model's fatal class): the loop stops.
  virtual bool healthy() = 0;

  virtual void open(const std::string& shard, std::vector<storage::InFlightEntry> earlier) = 0;
  struct Opened {
    bool ready = false;
    std::vector<LoggedDelivery> delivered;  // of `earlier`, those the shard's records show delivered
    std::string problem;                    // while not ready: what it waits for ("" when nothing failed)
  };
  virtual Opened opened(const std::string& shard) = 0;
  virtual void close(const std::string& shard, bool lost) = 0;
  // Transactions and purges since start (the other fields of DeliveryCounters stay 0 here).
  virtual DeliveryCounters counters() const = 0;
  // Shards whose records wait until the owner confirms that Redis still holds its fence (a
  // transactional producer rebuilt after a failure: ShardStream); confirm() lets them go on.
  virtual std::vector<std::string> unconfirmed() const { return {}; }
  virtual void confirm(const std::string& /*shard*/) {}
};

// at_least_once: the loop's idempotent producer, shared by every shard. A lost shard purges the
// records the producer has not sent yet (of every shard: they come back as not written and are
// produced again, by this instance for its shards and by the new owner for the lost ones), so
// that nothing queued before the loss reaches Kafka after the new owner took over; what was
// already in a request to Kafka may still be written, and is delivered twice.
class IdempotentSink final : public RecordSink {
 public:
  IdempotentSink(const connectors::Properties& props, connectors::KafkaProducer::ReportHandler on_report)
      : producer_(props, std::move(on_report)) {}

  void produce(const connectors::OutRecord& rec, const std::string& shard, std::int64_t late_ms) override;
  void prepare(const std::string& topic, const std::string& /*shard*/) override { producer_.prepare(topic); }
  int poll(int timeout_ms) override { return producer_.poll(timeout_ms); }
  bool flush(int timeout_ms) override { return producer_.flush(timeout_ms); }
  std::uint64_t produced() const override { return producer_.produced(); }
  bool lingers() const override { return true; }
  void on_reports_queued(std::function<void()> wake) override { producer_.on_reports_queued(std::move(wake)); }
  bool healthy() override { return recovery_.check(producer_, "ready"); }
  void open(const std::string& /*shard*/, std::vector<storage::InFlightEntry> /*earlier*/) override {}
  Opened opened(const std::string& /*shard*/) override { return {true, {}, ""}; }
  void close(const std::string& shard, bool lost) override;
  DeliveryCounters counters() const override {
    DeliveryCounters c;
    c.purged = producer_.purged();
    return c;
  }
  // The producer itself (a test injects its faults through it).
  connectors::KafkaProducer& producer() { return producer_; }

 private:
  connectors::KafkaProducer producer_;
  ProducerRecovery recovery_;
};

}  // namespace delayd::broker
