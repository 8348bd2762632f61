// KafkaProducer: an idempotent Kafka producer whose every record ends in exactly one
// DeliveryReport handed to the caller's handler, success or failure alike.
//
// Why idempotent with acks=all: a ready record is marked `ready` in Redis only after its report
// says ok, so "ok" must mean "durably in the log, written once". librdkafka's idempotence keeps
// retries from duplicating or reordering records within a partition; duplicates across a crash
// remain possible and carry the same job-id (the broker's at-least-once contract).
//
// Properties: the caller's are applied in order on top of these defaults, which the caller may
// override: enable.idempotence=true, acks=all. bootstrap.servers is required.
//
// Invariants:
//   - Each record accepted by produce() gets exactly one report, served by poll()/flush()/
//     produce() on the calling thread; outstanding() counts accepted records not yet reported.
//   - A record refused at enqueue time (invalid topic name, record too large, producer fenced
//     by a fatal error) is reported through the handler with ok=false from inside produce();
//     produce() throws only when librdkafka's queue stays full for the whole timeout (0: do not
//     wait, which is what a thread that must never block passes).
//   - Every failed report carries a DeliveryError class (record.hpp), so callers never parse
//     librdkafka's messages to decide between "retry", "give up" and "unknown".
//   - ok means acknowledged with an offset: with acks other than 0, a success without one is
//     reported as possibly_persisted (delivery_class.hpp says why).
//   - The destructor does not call the handler: records still outstanding are purged and their
//     reports dropped. Call flush() first to learn their fate.
//
// Threading: not thread-safe. One thread calls produce/poll/flush/outstanding and receives the
// reports (the handler runs on it, inside those calls). librdkafka's own threads only ever call
// the log hook and the wake hook (on_reports_queued()). Move-only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "connectors/kafka_error.hpp"
#include "connectors/record.hpp"

namespace delayd::connectors {

class KafkaProducer {
 public:
  // Called once per record with its outcome. If it throws, the exception leaves the
  // poll()/flush()/produce() that served the report, once librdkafka's callback has returned;
  // later reports served by the same call still reach the handler, and only the first exception
  // is kept.
  using ReportHandler = std::function<void(const DeliveryReport&)>;

  // Throws KafkaConfigError for a refused or missing property.
  KafkaProducer(const Properties& props, ReportHandler on_report);
  ~KafkaProducer();
  KafkaProducer(KafkaProducer&&) noexcept;
  KafkaProducer& operator=(KafkaProducer&&) noexcept;
  KafkaProducer(const KafkaProducer&) = delete;
  KafkaProducer& operator=(const KafkaProducer&) = delete;

  // Enqueues a copy of `rec` (the caller may reuse it at once). If librdkafka's queue is full,
  // serves poll() and retries until timeout_ms has passed, then throws KafkaError.
  void produce(const OutRecord& rec, int timeout_ms = 5000);

  // The topic's partition count from fresh metadata (one request, up to timeout_ms); nullopt if
  // the topic does not exist. Throws KafkaError if Kafka does not answer.
  std::optional<int> partition_count(const std::string& topic, int timeout_ms);

  // Asks for `topic`'s metadata now unless this instance already knows the topic, so that a
  // record produced to it later does not wait for it (a topic's first record would, and a
  // flush too short to see the answer would leave it to wait out linger.ms). Never blocks; a
  // name that cannot be a topic changes nothing (produce() reports it).
  void prepare(const std::string& topic);

  // Serves delivery reports (and error events) for up to timeout_ms; returns how many events
  // were served.
  int poll(int timeout_ms);

  // Waits up to timeout_ms for every outstanding record to be reported, serving the reports.
  // True when nothing is outstanding afterwards.
  bool flush(int timeout_ms);

  // Hands `report` to the handler now, as a report of this producer (for a record the caller
  // could not hand to produce(), so that it has one failure path); an exception of the handler
  // leaves this call.
  void report_now(const DeliveryReport& report);

  // Records accepted by produce() whose report has not yet been handed to the handler.
  int outstanding() const;

  // Calls `wake` from a librdkafka thread whenever a report (or another event poll() serves) is
  // queued while none was waiting, so that a thread asleep on something else can come and poll()
  // as soon as Kafka has answered. `wake` must be quick, must not throw and must not call this
  // producer. It is kept across recover_if_fatal(); an empty function removes it. Once this
  // returns, the previous hook is neither running nor called again.
  void on_reports_queued(std::function<void()> wake);

  // Records accepted by produce() since this producer was made (a recovery keeps counting).
  // Never decreases: a caller compares two readings to learn whether anything was produced.
  std::uint64_t produced() const;

  // librdkafka's reason when the producer has hit a fatal error (with idempotence: a broken
  // sequence it cannot repair). From then on every record fails; the only remedy is a new
  // producer. nullopt while healthy.
  std::optional<std::string> fatal_error() const;

  // If the producer has hit a fatal error: reports every outstanding record (class
  // possibly_persisted for those that were in flight, transient for those still queued), replaces
  // the librdkafka instance with a new one built from the same properties, and returns the
  // reason. nullopt (and nothing done) while healthy. Throws KafkaConfigError if the new
  // instance cannot be built. Postcondition: outstanding() == 0 when it returns a reason.
  std::optional<std::string> recover_if_fatal();

  // When the fatal error is Kafka refusing the client (kafka_error.hpp: Refusal; an idempotent
  // producer whose user may write to no topic cannot get its producer id), its sentence;
  // nullopt otherwise. A new producer would be refused too until the ACL is granted: the caller
  // retries with a backoff instead of counting it as a broken client. Records of such a producer
  // are reported as DeliveryError::refused (recover_if_fatal() too: nothing of them was written).
  std::optional<std::string> fatal_refusal() const;

  // Removes the records librdkafka has not sent yet (PURGE_QUEUE, not waiting): each is reported
  // through the handler as not written (transient), from the next poll() on. Records already in a
  // request to a broker are left alone: they may be written. Returns how many records were
  // outstanding (queued or in flight) when it was called.
  int purge_queued();
  // Records reported as purged (purge_queued(), or a fatal recovery) since this producer was made.
  std::uint64_t purged() const;

  // ---- Transactions: a producer made with the property transactional.id -------------------
  // Each call maps librdkafka's answer onto what the caller must do next:
  //   ok       done
  //   retry    the same call again (a timeout; the transaction's outcome is not known yet)
  //   abort    abort_transaction(), then begin again (a record of it failed, or the
  //            coordinator aborted it: none of its records becomes visible)
  //   fenced   another producer with the same transactional.id initialised it since: this one can
  //            never commit again (the id belongs to the other now)
  //   fatal    any other fatal error (refused: Kafka refused the login or the id's ACL; `error`
  //            says so): this instance can do nothing more
  // The blocking ones wait up to timeout_ms; call them on a thread that may block.
  struct TxnOutcome {
    enum class Kind { ok, retry, abort, fenced, fatal };
    Kind kind = Kind::ok;
    std::string error;     // librdkafka's words; empty for ok
    bool refused = false;  // fatal because Kafka refused the client (kafka_error.hpp: Refusal)
  };
  // Registers the transactional.id with its coordinator and fences every earlier producer of the
  // same id: a transaction of theirs still open is aborted (one whose commit was asked for is
  // completed first). Once it returns ok, none of them can commit again.
  TxnOutcome init_transactions(int timeout_ms);
  TxnOutcome begin_transaction();
  // Flushes the transaction's records, then commits them; each record's report has been served
  // through the handler before it returns (ok or not).
  TxnOutcome commit_transaction(int timeout_ms);
  TxnOutcome abort_transaction(int timeout_ms);

  // Puts the producer in librdkafka's fatal state on purpose (rd_kafka_test_fatal_error), so that
  // tests can exercise recover_if_fatal() and the callers' handling of DeliveryError::fatal.
  void inject_fatal_error_for_testing(const std::string& reason);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayd::connectors
