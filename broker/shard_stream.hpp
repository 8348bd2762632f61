// ShardStream: one shard's records, written in Kafka transactions (kafka.delivery = exactly_once)
// by a transactional producer of the shard's own (transactional.id = the shard's:
// config::transactional_id()), on a thread of its own. ShardTransactions runs one per owned shard
// (broker/shard_transactions.hpp has the design); this is its life:
//
//   opening   the producer is made and init_transactions() takes the id over, which fences every
//             earlier producer of the shard: a transaction of theirs still open is aborted (or
//             completed, if its commit had been asked for), and none of them can commit again.
//             Then, if the owner asked (a takeover: in-flight entries of an earlier epoch), the
//             shard's delivery log is read to its end, as committed transactions left it
//             (broker/delivery_log.hpp). Retried with backoff while Kafka fails or refuses;
//             problem() says why meanwhile.
//   open      each turn takes what produce() queued (up to kMaxPerTransaction records); those
//             to a topic Kafka says does not exist are reported unknown_topic at once (a record
//             of a missing topic would time out inside the transaction, which only a new epoch
//             can end); the rest go into a transaction, each with its log record, which until
//             linger_ms after the previous commit (late_linger_ms while the shard drains a
//             backlog of late records) takes what is queued meanwhile the same way, and commits:
//               committed                 every record reported ok
//               a record failed           aborted; that record reported with its error, the
//                                         others queued again at the front for the next turn
//               aborted otherwise         (the coordinator's timeout, say) all reported transient
//               commit outcome not known  commit asked again until it answers (librdkafka keeps
//                                         the transaction's state across the retries)
//               any other fatal error     rebuilding (below)
//   rebuilding  a fatal error that is not a fence (a delivery timeout inside the transaction,
//             which needs a new epoch; an invalid state): a new producer takes the id over, which
//             completes or aborts the failed transaction, and the delivery log says which: if a
//             record of it is there, it committed (a transaction is all or nothing) and all its
//             records are reported ok; if not, they are queued again. Then
//   unconfirmed  nothing is sent until the owner has confirmed, after the new producer's
//             init, that Redis still holds its fence for the shard (confirm()); a new owner that
//             took the fence before then is found so (the owner gives the shard up), and one that
//             takes it after inits after this producer, fencing it.
//   ended     fenced (another producer took the id over: the shard has a new owner): the
//             records queued and those of the open transaction are reported `fenced`, and so is
//             every record produced later; the owner gives the shard up.
// Invariants: every record given to produce() is reported exactly once through `post`; a report
// ok means its transaction committed (a read_committed consumer sees the record); a record is in
// at most one transaction at a time, and in a committed one at most once.
// Threading: produce(), state(), problem(), takeover(), idle(), stop() from any thread (the
// loop's); the transactions on the stream's own thread, which also calls `post` and `wake`.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "broker/delivery_log.hpp"
#include "broker/duration_histogram.hpp"
#include "broker/rate_window.hpp"
#include "connectors/kafka_producer.hpp"

namespace delayd::broker {

class ShardStream {
 public:
  // Records in one transaction at most: a burst is committed in pieces, so that one commit's
  // flush does not hold the first records back behind a hundred thousand others.
  static constexpr std::size_t kMaxPerTransaction = 20'000;

  struct Options {
    std::string shard;
    connectors::Properties producer;  // with transactional.id
    connectors::Properties reader;    // for the delivery log (read_committed, librdkafka's default)
    std::string log_topic;
    std::int32_t log_partition = 0;
    std::optional<std::int64_t> takeover_since;  // read the log from here (epoch ms); none: no read
    int timeout_ms = 5000;                       // for each call to Kafka (init, commit, abort, a read)
    // The shortest time between two commits, in ms (kafka.transaction_linger_ms; 0: a
    // transaction commits what it took at once). A transaction begun sooner than that after the
    // previous commit stays open until then for the records produce() queues; one begun later (a
    // lone record after a quiet spell) commits at once. Meanwhile the stream's thread sleeps
    // (produce() wakes it only for a stop or a full transaction) and the records wait in the
    // outbox, each stamped with the time produce() queued it (its timestamp in Kafka); at the
    // linger's end they are produced together, leave at the commit's flush, and the commit makes
    // them visible to read_committed consumers. Fewer, larger transactions under load (each
    // commit costs the broker a few requests and log writes whatever it holds), and no wake-up a
    // record.
    std::int64_t linger_ms = 0;
    // A transaction lingers only while the shard takes at least this many records a linger (its
    // rate over the last kRateWindow that ended, times linger_ms): a sparse shard's records
    // commit at once, as without a linger, so that a job firing soon after its shard's previous
    // commit does not wait for the linger when fewer than this would join it. 0: always linger.
    int linger_min_records = 4;
    // The linger, in ms, while the shard drains a backlog (kafka.transaction_late_linger_ms): a
    // shard given a record already at least this late (produce()'s late_ms) within the last
    // kRateWindow lingers this long after its previous commit instead of linger_ms, the rate gate
    // alike. Its jobs are late already, and fewer, larger commits drain the backlog sooner: a
    // million due at once drained in 29.9-30.5 s with 100 and 32.5-35.0 without on two cores
    // (docs/performance/burst.md, "A longer linger for a backlog"). 0, or not above linger_ms:
    // linger_ms throughout. A shard whose records are on time never waits longer than linger_ms;
    // late_ms counts from the job's due time, so jobs published already that late count too.
    std::int64_t late_linger_ms = 0;
  };
  // The window over which a shard's record rate is measured for linger_min_records.
  static constexpr std::chrono::milliseconds kRateWindow{100};
  enum class State : unsigned char { opening, open, rebuilding, unconfirmed, ended };
  // Reports of finished records (ok or not), from the stream's thread; must not block for long.
  using Post = std::function<void(std::vector<connectors::DeliveryReport>)>;

  // Starts the thread, which opens the stream. `post` and `wake` must outlive the stream.
  ShardStream(Options options, Post post, std::function<void()> wake);
  ~ShardStream();  // stop(true), then joins
  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;

  // Queues a record of the shard (its tag's kind decides its log record), `late_ms` past its due
  // time when the fire path handed it over (0: on time, or not a fire). An ended stream reports
  // it `fenced` at once (through `post`).
  void produce(connectors::OutRecord rec, std::int64_t late_ms = 0);
  State state() const { return state_.load(); }
  // While opening: what it waits for ("" when nothing failed yet); once ended: why.
  std::string problem() const;
  // Once open: the deliveries the log held from takeover_since (empty without a takeover).
  std::vector<LoggedDelivery> takeover() const;
  // Nothing queued, and no transaction under way.
  bool idle() const;
  // Records queued and not taken into a transaction yet.
  std::size_t queued() const;
  // The owner has checked, after a rebuild, that the shard's fence is still its own: sending goes
  // on (State::unconfirmed -> open).
  void confirm();
  // Asks the thread to end: after committing what is queued (abort false: a revoke, drained), or
  // at once, abandoning the open transaction (abort true: a lost shard; the next owner's
  // producer aborts it, or the coordinator's timeout does). Returns at once; done() says when the
  // thread has ended (every record reported).
  void stop(bool abort);
  bool done() const { return done_.load(); }
  const std::string& shard() const { return options_.shard; }
  // Transactions committed, aborted, and producers rebuilt, since the stream began.
  std::uint64_t committed() const { return committed_.load(std::memory_order_relaxed); }
  std::uint64_t aborted() const { return aborted_.load(std::memory_order_relaxed); }
  std::uint64_t rebuilt() const { return rebuilt_.load(std::memory_order_relaxed); }
  // How long each commit took, from the first commit_transaction() call to the answer that ended
  // it (committed, aborted, fenced or failed; the retries of an unanswered commit included; a
  // commit abandoned by stop(true) is not counted). A copy, from any thread.
  DurationHistogram commit_latency() const;

 private:
  void run();
  // The opening; false if a stop was asked for before it finished.
  bool open_stream();
  // A new producer that has taken the id over (retried with backoff, problem() saying why);
  // false if a stop was asked for first. `what` names the step in the log.
  bool init_producer(const std::string& what);
  // After a fatal error that is not a fence: rebuilding (see the top), then unconfirmed until
  // confirm(). `began_ms`: when the failed transaction began (wall clock).
  void rebuild(std::vector<connectors::OutRecord> batch, const std::string& why, std::int64_t began_ms);
  // `batch` less its records to topics that do not exist (reported unknown_topic).
  std::vector<connectors::OutRecord> without_missing_topics(std::vector<connectors::OutRecord> batch);
  // The next transaction's records (waiting for some); empty when the thread should end.
  std::vector<connectors::OutRecord> next_batch();
  void transact(std::vector<connectors::OutRecord> batch);
  // Produces `records` into the open transaction, each with its log record; one refused at
  // enqueue time is recorded in reports_ (and outside_) instead.
  void produce_all(const std::vector<connectors::OutRecord>& records);
  // Keeps the open transaction taking what produce() queues until linger_ms (late_linger_ms while
  // the shard drains a backlog) after the previous commit was asked for, asleep meanwhile
  // (produce() wakes it only when the outbox would fill the transaction: wake_at_) (returns at
  // once if that is past, or if the shard took fewer than linger_min_records a linger over its
  // last rate window), a stop, or kMaxPerTransaction records in `batch` (which gains what it
  // took).
  void linger(std::vector<connectors::OutRecord>& batch);
  // Ends the stream (fenced or fatal), reporting `batch` and everything queued `fenced`.
  void end(const std::string& why, std::vector<connectors::OutRecord> batch);
  void report_all(const std::vector<connectors::OutRecord>& records, connectors::DeliveryError error,
                  const std::string& why);
  void post(std::vector<connectors::DeliveryReport> reports);
  // The producer's handler: the records of the current transaction's reports.
  void on_report(const connectors::DeliveryReport& report);
  // Sleeps up to ms, woken by stop().
  void nap(std::int64_t ms);

  const Options options_;
  const Post post_;
  const std::function<void()> wake_;

  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<connectors::OutRecord> outbox_;  // guarded by mutex_
  std::size_t in_transaction_ = 0;            // guarded by mutex_: records taken, not yet reported
  std::string problem_;                       // guarded by mutex_
  std::vector<LoggedDelivery> takeover_;      // guarded by mutex_
  bool stop_ = false;                         // guarded by mutex_
  bool abort_ = false;                        // guarded by mutex_
  bool confirmed_ = false;                    // guarded by mutex_: confirm() since the last rebuild
  // guarded by mutex_: while the stream's thread lingers, the outbox size at which produce()
  // wakes it (the room left in the transaction); 0: produce() wakes it for every record.
  std::size_t wake_at_ = 0;
  // guarded by mutex_: when produce() last took a record at least late_linger_ms late (the
  // epoch: never). Within kRateWindow of it the shard drains a backlog, and lingers longer.
  std::chrono::steady_clock::time_point late_at_{};
  std::atomic<State> state_{State::opening};
  std::atomic<bool> done_{false};
  std::atomic<std::uint64_t> committed_{0};
  std::atomic<std::uint64_t> aborted_{0};
  std::atomic<std::uint64_t> rebuilt_{0};
  mutable std::mutex stats_mutex_;    // only for commit_latency_ (not mutex_: produce() takes that)
  DurationHistogram commit_latency_;  // guarded by stats_mutex_

  // The stream's thread only:
  std::unique_ptr<connectors::KafkaProducer> producer_;
  std::unordered_map<std::uint64_t, connectors::DeliveryReport> reports_;  // this transaction's, by tag
  std::optional<connectors::DeliveryReport> log_failure_;                  // a log record's failure
  std::set<std::string> known_topics_;  // topics metadata showed to exist (forgotten at a rebuild)
  std::set<std::uint64_t> outside_;     // this batch's records refused at enqueue: not in the transaction
  RateWindow taken_{kRateWindow};       // the records taken into transactions, for linger_min_records
  // When the last commit was asked for (steady clock; the epoch: none yet). linger() keeps a
  // transaction open until linger_ms after it.
  std::chrono::steady_clock::time_point last_commit_{};

  std::thread thread_;  // last: started once everything it uses exists
};

}  // namespace delayd::broker
