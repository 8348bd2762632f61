// ShardTransactions: exactly-once delivery (kafka.delivery = exactly_once). Every record delayd
// writes about a job of a shard (its ready record, its dead-letter copy, an etf1 job's tombstone
// and history copy) goes out in a Kafka transaction of that shard's own producer, together with a
// record of it in the shard's delivery log; a read_committed consumer of the ready topics sees a
// record only once its transaction committed, and sees each job once, whatever happens to the
// instances.
//
// THE DESIGN.
// What fences a zombie. Each shard has a transactional id of its own (config::transactional_id():
// <group>.<shard>), and whoever owns the shard writes through a producer with that id. A new
// owner's producer calls init_transactions(), and Kafka's transaction coordinator then aborts the
// old owner's open transaction (or completes it, if its commit had already been asked for) and
// refuses every later request of the old producer (PRODUCER_FENCED). So Kafka enforces the fence,
// not delayd's bookkeeping: a member paused past its session, cut off from Kafka, or simply slow
// to learn of a rebalance can never commit a record of a shard that another member has opened.
// (The alternative, one producer per instance fenced by the consumer group's generation through
// send_offsets_to_transaction (KIP-447), leaves a gap as such: a zombie whose offsets went into
// its transaction before the cut, and whose records were still in its queue, could commit them
// after the new owner had looked. It closes only if every transaction carries offsets of each
// shard it holds records of (the group then refuses a zombie's later ones, its transaction
// aborts), and a new owner looks only once the shard's committed offsets are stable (an
// OffsetFetch with require_stable, which librdkafka sends for a read_committed consumer, waits
// for a pending transaction's offsets): the ingest offsets would move into the transactions, a
// redesign of the ingest commit not made. A transactional id per shard leaves no gap. Its cost is
// a producer (and a thread) per owned shard: docs/performance/cost.md, "Where a shard's cost is".)
//
// What a transaction holds. The records of one shard produced since the last commit began (at
// most ShardStream::kMaxPerTransaction), each job record with its log record (delivery_log.hpp),
// and etf1 follow-ups right after their ready record; with kafka.transaction_linger_ms, also those
// queued while it stays open until that long after the previous commit (the stream's thread
// sleeps meanwhile; each record keeps the time it was queued as its timestamp, and all are
// produced at the linger's end, sent at the commit and committed together: at most one commit per linger under
// load, each of which costs the broker the same whatever it holds; a lone record after a quiet
// spell, or any on a shard taking fewer than ShardStream::Options::linger_min_records a linger,
// commits at once). No offsets: the ingest
// offsets are the ingest stages' (their commits follow the job's write to Redis, as in at_least_once). A record is
// reported ok only after its transaction committed; only then is the job marked ready in Redis.
//
// The takeover: what was delivered. A shard's in-flight entries in Redis ("<attempt> <firing_at>
// <epoch>") are jobs claimed whose outcome was not written. When an owner opens a shard
// (Ownership: the Redis fence first, with a larger epoch, then this), the entries of an earlier
// epoch are the question: did their transaction commit? Once init_transactions() has returned,
// every earlier transaction of the shard is finished, so the shard's log partition, read to its
// end as read_committed, holds exactly the deliveries that reached Kafka. From the oldest such
// entry's firing_at (less a minute) to the end:
//
//   in-flight entry (job, a[, occurrence r])        the owner's decision
//   of an earlier epoch
//   "ready a" ("ready a/r") the job's latest in     claimed keeping attempt a (claim.lua), settled
//   the log                                         as delivered: marked ready, nothing produced
//   "dead a[/r] <reason>" the latest in the log     claimed keeping a, settled as dead-lettered
//                                                   with that reason: marked failed, nothing sent
//   not in the log, or another attempt or           claimed again as usual (attempt a + 1) and
//   occurrence there                                produced: its earlier record never committed
// The occurrence matters because every occurrence of a repeat is attempt 1: the log's line for
// occurrence r - 1 says nothing of occurrence r (delivery_log.hpp). A restart of a single
// instance is the same takeover, of every shard.
//
// The crash table, beside storage/job_store.hpp's (whose other rows hold as they are):
//
//   step       the write                              crash after it (delayd dies)
//   produce    the record and its log record into     the transaction is never committed: the
//              the shard's open transaction           next owner's init aborts it; the job is
//                                                     claimed again and produced once
//   commit     EndTxn: the records become visible     the next owner finds the log record and
//                                                     marks the job without a second record
//   mark       ready (failed, for a dead letter)      done
// and a zombie (an owner that lost the shard without knowing, still running):
//   zombie's transaction open when the new owner      aborted by the new owner's init: none of
//   initialises                                       its records becomes visible
//   zombie's commit asked before the new owner's      completed first; the new owner's log read
//   init                                              sees it and marks those jobs
//   zombie's later produce or commit                  refused (fenced): its stream ends, its
//                                                     records are reported fenced, it gives the
//                                                     shard up (FirePath::lose())
//
// A shard lost and taken again by this instance (a leave and a join, a rebalance that gives it
// back) has a new stream while the old one is still ending; the old one's records come back
// `fenced` (its stop, or the new stream's init fencing it). Such a report says nothing of the
// shard's current stream, so it must not make the fire path give the shard up (it once did, and
// the shard, its new stream closed while opening, was owned by nobody until a restart): poll()
// passes a failure of a stream that is no longer its shard's as possibly_persisted, and the job
// is retried by the claim path, which the new stream's log read (FirePath::recover()) decides.
// The new stream starts only once the old one has ended: an old stream stopped inside
// init_transactions() still takes the id over when that call returns, and would fence the new
// one (seen under the sanitizer build); meanwhile opened() says it waits.
//
// What a rebalance does to an open transaction. A revoke first drains (Ownership): flush() waits
// for every stream to commit what it holds (after its linger, if it lingers: at most
// kafka.transaction_linger_ms more), the marks are written, and only then is the stream closed.
// A lost shard (session timeout) is closed at once, its open transaction abandoned: the
// new owner's init aborts it, or the coordinator after transaction.timeout.ms (10 s by default
// here). An instance cut off from Kafka can commit nothing meanwhile; when the cut heals its
// stream is fenced if another member took the shard, or commits if none did (then nobody else
// produced the jobs).
//
// Threading: the scheduling loop's thread for every method; each stream's own thread posts
// reports into a queue (guarded by a mutex) that poll() serves on the loop's thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/record_sink.hpp"
#include "broker/shard_stream.hpp"

namespace delayd::broker {

class ShardTransactions final : public RecordSink {
 public:
  struct Options {
    // The properties of `shard`'s producer (transactional.id set: config::transactional_id()).
    std::function<connectors::Properties(const std::string& shard)> producer;
    connectors::Properties reader;  // for the delivery logs
    // `shard`'s delivery log: its topic and partition (config::delivery_log_topic()).
    std::function<std::pair<std::string, std::int32_t>(const std::string& shard)> log_of;
    int timeout_ms = 5000;
    std::int64_t linger_ms = 0;       // ShardStream::Options::linger_ms (kafka.transaction_linger_ms)
    std::int64_t late_linger_ms = 0;  // ShardStream::Options::late_linger_ms (kafka.transaction_late_linger_ms)
  };
  ShardTransactions(Options options, connectors::KafkaProducer::ReportHandler on_report);
  ~ShardTransactions() override;

  void produce(const connectors::OutRecord& rec, const std::string& shard, std::int64_t late_ms) override;
  void prepare(const std::string& /*topic*/, const std::string& /*shard*/) override {}
  int poll(int timeout_ms) override;
  bool flush(int timeout_ms) override;
  std::uint64_t produced() const override { return produced_; }
  bool lingers() const override { return false; }  // a commit sends at once
  void on_reports_queued(std::function<void()> wake) override;
  bool healthy() override;
  void open(const std::string& shard, std::vector<storage::InFlightEntry> earlier) override;
  Opened opened(const std::string& shard) override;
  void close(const std::string& shard, bool lost) override;
  DeliveryCounters counters() const override;
  std::vector<std::string> unconfirmed() const override;
  void confirm(const std::string& shard) override;

  // Shards with a stream (opening, open, or ended and not closed yet).
  std::size_t streams() const { return streams_.size(); }

 private:
  // A stream's reports; `generation` names the stream (open() numbers them).
  void post(const std::string& shard, std::uint64_t generation, std::vector<connectors::DeliveryReport> reports);
  void wake();
  // Joins the streams that have ended after close().
  void reap();

  Options options_;
  connectors::KafkaProducer::ReportHandler on_report_;
  struct Stream {
    std::unique_ptr<ShardStream> stream;  // null while an earlier stream of the shard is ending
    std::uint64_t generation = 0;
    ShardStream::Options waiting;  // the options to start it with, while stream is null
  };
  // Starts the streams that waited for an earlier stream of their shard to end.
  void start_waiting();
  void start(const std::string& shard, Stream& s);
  std::map<std::string, Stream, std::less<>> streams_;
  std::map<std::string, std::vector<storage::InFlightEntry>, std::less<>> earlier_;
  std::vector<std::unique_ptr<ShardStream>> closing_;
  DeliveryCounters ended_;  // the transactions of streams reaped
  std::uint64_t produced_ = 0;
  std::uint64_t generations_ = 0;  // streams opened so far

  struct Posted {
    std::string shard;
    std::uint64_t generation = 0;
    connectors::DeliveryReport report;
  };

  std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<Posted> reports_;  // guarded by mutex_
  std::function<void()> wake_;  // guarded by mutex_
};

}  // namespace delayd::broker
