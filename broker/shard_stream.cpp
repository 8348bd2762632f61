#include "broker/shard_stream.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "base/backoff.hpp"
#include "base/thread_name.hpp"
#include "broker/outage.hpp"
#include "broker/wall_clock.hpp"
#include "connectors/topic_reader.hpp"

namespace delayd::broker {

namespace {

using connectors::DeliveryError;
using connectors::DeliveryReport;
using Txn = connectors::KafkaProducer::TxnOutcome::Kind;

// A log record's tag: no job's (FirePath's tags all have a kind byte).
constexpr std::uint64_t kLogTag = 0;
// How far before a failed transaction's start a rebuild reads the log from (clock steps).
constexpr std::int64_t kRebuildSlackMs = 60'000;

// A record's own failure in an aborted transaction, as opposed to the abort's purge of the
// records that were fine (reported transient, or possibly written if they were in flight).
bool own_failure(const DeliveryReport& r) {
  return !r.ok && r.error_class != DeliveryError::transient && r.error_class != DeliveryError::possibly_persisted;
}

// A record queued again after its transaction did not commit: it is sent later than it was
// first queued, and its Kafka timestamp says when (the producer's time at the next produce()).
connectors::OutRecord restamped(connectors::OutRecord rec) {
  rec.timestamp_ms = -1;
  return rec;
}

}  // namespace

ShardStream::ShardStream(Options options, Post post, std::function<void()> wake)
    : options_(std::move(options)), post_(std::move(post)), wake_(std::move(wake)) {
  thread_ = std::thread([this] { run(); });
}

ShardStream::~ShardStream() {
  stop(true);
  if (thread_.joinable()) thread_.join();
}

void ShardStream::produce(connectors::OutRecord rec, std::int64_t late_ms) {
  {
    std::lock_guard lock(mutex_);
    if (state_.load() != State::ended && !stop_) {
      if (options_.linger_ms > 0 && rec.timestamp_ms < 0) rec.timestamp_ms = system_now_ms();
      if (options_.late_linger_ms > options_.linger_ms && late_ms >= options_.late_linger_ms) {
        late_at_ = std::chrono::steady_clock::now();
      }
      outbox_.push_back(std::move(rec));
      if (wake_at_ == 0 || outbox_.size() >= wake_at_) queued_.notify_one();
      return;
    }
  }
  report_all({rec}, DeliveryError::fenced, "shard " + options_.shard + "'s transactions have ended: " + problem());
}

DurationHistogram ShardStream::commit_latency() const {
  std::lock_guard lock(stats_mutex_);
  return commit_latency_;
}

std::string ShardStream::problem() const {
  std::lock_guard lock(mutex_);
  return problem_;
}

std::vector<LoggedDelivery> ShardStream::takeover() const {
  std::lock_guard lock(mutex_);
  return takeover_;
}

bool ShardStream::idle() const {
  std::lock_guard lock(mutex_);
  return outbox_.empty() && in_transaction_ == 0;
}

std::size_t ShardStream::queued() const {
  std::lock_guard lock(mutex_);
  return outbox_.size();
}

void ShardStream::confirm() {
  std::lock_guard lock(mutex_);
  confirmed_ = true;
  queued_.notify_all();
}

void ShardStream::stop(bool abort) {
  std::lock_guard lock(mutex_);
  stop_ = true;
  abort_ = abort_ || abort;
  queued_.notify_all();
}

void ShardStream::nap(std::int64_t ms) {
  std::unique_lock lock(mutex_);
  queued_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stop_; });
}

void ShardStream::run() {
  base::name_this_thread("txn");
  if (open_stream()) {
    for (;;) {
      auto batch = next_batch();
      if (batch.empty()) break;
      transact(std::move(batch));
      if (state_.load() == State::ended) break;
    }
  }
  // What is left was never in a committed transaction: not written, and never will be by us.
  std::vector<connectors::OutRecord> left;
  {
    std::lock_guard lock(mutex_);
    left.assign(std::make_move_iterator(outbox_.begin()), std::make_move_iterator(outbox_.end()));
    outbox_.clear();
    if (state_.load() != State::ended && problem_.empty()) problem_ = "stopped";
  }
  state_ = State::ended;
  report_all(left, DeliveryError::fenced, "shard " + options_.shard + "'s transactions were stopped: not written");
  producer_.reset();  // purges and destroys; nothing of it can commit any more
  done_ = true;
  if (wake_) wake_();
}

bool ShardStream::init_producer(const std::string& what) {
  base::Backoff backoff = outage_backoff();
  bool told = false;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return false;
    }
    std::string why;
    try {
      if (!producer_) {
        producer_ = std::make_unique<connectors::KafkaProducer>(options_.producer,
                                                                [this](const DeliveryReport& r) { on_report(r); });
      }
      const auto init = producer_->init_transactions(options_.timeout_ms);
      if (init.kind == Txn::ok) {
        if (told) spdlog::info("shard {}: {}: done", options_.shard, what);
        return true;
      }
      if (init.kind != Txn::retry) producer_.reset();  // a fatal producer is of no further use
      why = "taking transactional id over: " + init.error;
    } catch (const std::exception& e) {
      producer_.reset();
      why = e.what();
    }
    {
      std::lock_guard lock(mutex_);
      problem_ = why;
    }
    if (!told) spdlog::warn("shard {}: {}: {} (retrying)", options_.shard, what, why);
    told = true;
    if (wake_) wake_();
    nap(backoff.next().count());
  }
}

bool ShardStream::open_stream() {
  base::Backoff backoff = outage_backoff();
  for (;;) {
    if (!init_producer("opening its transactions")) return false;
    try {
      connectors::TopicReader reader(options_.reader);
      const auto partitions = reader.partitions(options_.log_topic, options_.timeout_ms);
      if (!partitions || *partitions <= options_.log_partition) {
        throw connectors::KafkaError(
            "its delivery log " + options_.log_topic + " has " + std::to_string(partitions.value_or(0)) +
            " partitions, and shard " + options_.shard + " needs partition " + std::to_string(options_.log_partition) +
            " (give it as many partitions as the ingest topic; kafka.create_topics creates it so)");
      }
      std::vector<LoggedDelivery> logged;
      if (options_.takeover_since) {
        logged = read_delivery_log(reader, options_.log_topic, options_.log_partition, *options_.takeover_since,
                                   options_.timeout_ms);
      }
      {
        std::lock_guard lock(mutex_);
        takeover_ = std::move(logged);
        problem_.clear();
      }
      state_ = State::open;
      if (wake_) wake_();
      return true;
    } catch (const std::exception& e) {
      bool first = false;
      {
        std::lock_guard lock(mutex_);
        first = problem_.empty();
        problem_ = e.what();
      }
      if (first) spdlog::warn("shard {}: opening its transactions: {} (retrying)", options_.shard, e.what());
      if (wake_) wake_();
      nap(backoff.next().count());
      std::lock_guard lock(mutex_);
      if (stop_) return false;
    }
  }
}

std::vector<connectors::OutRecord> ShardStream::without_missing_topics(std::vector<connectors::OutRecord> batch) {
  std::set<std::string> missing;
  for (const auto& rec : batch) {
    if (known_topics_.count(rec.topic) != 0 || missing.count(rec.topic) != 0) continue;
    try {
      if (producer_->partition_count(rec.topic, options_.timeout_ms)) {
        known_topics_.insert(rec.topic);
      } else {
        missing.insert(rec.topic);
      }
    } catch (const connectors::KafkaError&) {
      // Not known now: the transaction finds out (its records fail, or it commits).
    }
  }
  if (missing.empty()) return batch;
  std::vector<connectors::OutRecord> keep;
  std::vector<DeliveryReport> gone;
  for (auto& rec : batch) {
    if (missing.count(rec.topic) == 0) {
      keep.push_back(std::move(rec));
      continue;
    }
    DeliveryReport r;
    r.tag = rec.tag;
    r.topic = rec.topic;
    r.error_class = DeliveryError::unknown_topic;
    r.error = "Broker: Unknown topic or partition (topic " + rec.topic + " does not exist)";
    gone.push_back(std::move(r));
  }
  post(std::move(gone));
  return keep;
}

void ShardStream::rebuild(std::vector<connectors::OutRecord> batch, const std::string& why, std::int64_t began_ms) {
  state_ = State::rebuilding;
  rebuilt_.fetch_add(1, std::memory_order_relaxed);
  known_topics_.clear();
  producer_.reset();
  spdlog::warn(
      "shard {}: its transaction failed ({}); a new producer takes the transactional id over and the "
      "delivery log tells whether the transaction committed",
      options_.shard, why);
  // Records refused at enqueue time were never in it: their failures stand.
  std::vector<DeliveryReport> refused;
  std::vector<connectors::OutRecord> records;
  for (auto& rec : batch) {
    if (outside_.count(rec.tag) != 0) {
      refused.push_back(reports_.at(rec.tag));
    } else {
      records.push_back(std::move(rec));
    }
  }
  post(std::move(refused));
  base::Backoff backoff = outage_backoff();
  bool committed = false;
  for (;;) {
    if (!init_producer("rebuilding its transactions")) {
      report_all(records, DeliveryError::fenced, "shard " + options_.shard + "'s transactions were stopped");
      return;
    }
    try {
      connectors::TopicReader reader(options_.reader);
      const auto logged = read_delivery_log(reader, options_.log_topic, options_.log_partition,
                                            began_ms - kRebuildSlackMs, options_.timeout_ms);
      for (const auto& rec : records) {
        const auto mine = log_record(rec, tag_kind(rec.tag), options_.log_topic, options_.log_partition);
        if (!mine) continue;
        connectors::Record as_read;
        as_read.key = mine->key;
        as_read.value = mine->value;
        const auto d = parse_log_record(as_read);
        if (d && std::find(logged.begin(), logged.end(), *d) != logged.end()) {
          committed = true;
          break;
        }
      }
      break;
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mutex_);
        problem_ = e.what();
      }
      nap(backoff.next().count());
    }
  }
  if (committed) {
    std::vector<DeliveryReport> ok;
    for (const auto& rec : records) {
      DeliveryReport r;
      r.tag = rec.tag;
      r.topic = rec.topic;
      r.ok = true;
      ok.push_back(std::move(r));
    }
    spdlog::info("shard {}: the failed transaction had committed ({} records)", options_.shard, ok.size());
    post(std::move(ok));
  } else {
    spdlog::info("shard {}: the failed transaction had not committed: its {} records go again", options_.shard,
                 records.size());
    std::lock_guard lock(mutex_);
    for (auto it = records.rbegin(); it != records.rend(); ++it) outbox_.push_front(restamped(std::move(*it)));
    in_transaction_ -= std::min(in_transaction_, records.size());
  }
  {
    std::lock_guard lock(mutex_);
    problem_.clear();
    confirmed_ = false;
  }
  state_ = State::unconfirmed;
  if (wake_) wake_();
  std::unique_lock lock(mutex_);
  queued_.wait(lock, [this] { return stop_ || confirmed_; });
  if (!stop_) state_ = State::open;
}

std::vector<connectors::OutRecord> ShardStream::next_batch() {
  std::unique_lock lock(mutex_);
  queued_.wait(lock, [this] { return stop_ || !outbox_.empty(); });
  if (abort_ || (stop_ && outbox_.empty())) return {};
  const std::size_t n = std::min(outbox_.size(), kMaxPerTransaction);
  std::vector<connectors::OutRecord> batch(std::make_move_iterator(outbox_.begin()),
                                           std::make_move_iterator(outbox_.begin() + static_cast<std::ptrdiff_t>(n)));
  outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(n));
  in_transaction_ = n;
  return batch;
}

void ShardStream::on_report(const DeliveryReport& report) {
  if (report.tag == kLogTag) {
    if (!report.ok && !log_failure_) log_failure_ = report;
    return;
  }
  reports_[report.tag] = report;
}

void ShardStream::produce_all(const std::vector<connectors::OutRecord>& records) {
  for (const auto& rec : records) {
    try {
      producer_->produce(rec, options_.timeout_ms);
    } catch (const connectors::KafkaError& e) {
      // The queue stayed full: not in the transaction; reported transient after the commit.
      DeliveryReport r;
      r.tag = rec.tag;
      r.topic = rec.topic;
      r.error_class = DeliveryError::transient;
      r.error = e.what();
      reports_[rec.tag] = r;
    }
    // A record refused at enqueue time (too large, say) is reported at once and is not in the
    // transaction: it gets no log record, which would claim it delivered.
    if (const auto it = reports_.find(rec.tag); it != reports_.end() && !it->second.ok) {
      outside_.insert(rec.tag);
      continue;
    }
    if (auto log = log_record(rec, tag_kind(rec.tag), options_.log_topic, options_.log_partition)) {
      log->tag = kLogTag;
      producer_->produce(*log, options_.timeout_ms);
    }
  }
}

void ShardStream::linger(std::vector<connectors::OutRecord>& batch) {
  if (options_.linger_ms <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  taken_.add(batch.size(), now);
  const double per_linger = taken_.per_second(now) * static_cast<double>(options_.linger_ms) / 1000.0;
  if (per_linger < static_cast<double>(options_.linger_min_records)) return;  // sparse: commit at once
  std::int64_t linger_ms = options_.linger_ms;
  {
    std::lock_guard lock(mutex_);
    if (late_at_ != std::chrono::steady_clock::time_point{} && now - late_at_ < kRateWindow) {
      linger_ms = options_.late_linger_ms;  // a backlog: its jobs are late already
    }
  }
  const auto until = last_commit_ + std::chrono::milliseconds(linger_ms);
  bool stopping = false;
  while (batch.size() < kMaxPerTransaction) {
    std::vector<connectors::OutRecord> more;
    {
      // Asleep until the linger ends, a stop, or the outbox fills the transaction: the records
      // queued meanwhile join it together (produce() stamped each with its time).
      std::unique_lock lock(mutex_);
      wake_at_ = kMaxPerTransaction - batch.size();
      queued_.wait_until(lock, until, [this] { return stop_ || outbox_.size() >= wake_at_; });
      wake_at_ = 0;
      // A stop commits at once what the transaction holds and what is queued (an abort: only
      // what it holds).
      stopping = stop_;
      if (abort_ || outbox_.empty()) return;
      const std::size_t n = std::min(outbox_.size(), kMaxPerTransaction - batch.size());
      more.assign(std::make_move_iterator(outbox_.begin()),
                  std::make_move_iterator(outbox_.begin() + static_cast<std::ptrdiff_t>(n)));
      outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(n));
      in_transaction_ += n;
    }
    taken_.add(more.size(), std::chrono::steady_clock::now());
    more = without_missing_topics(std::move(more));
    produce_all(more);
    batch.insert(batch.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    if (stopping) return;
  }
}

void ShardStream::transact(std::vector<connectors::OutRecord> batch) {
  reports_.clear();
  outside_.clear();
  log_failure_.reset();
  const std::int64_t began_ms = system_now_ms();
  batch = without_missing_topics(std::move(batch));
  if (batch.empty()) return;
  const auto begun = producer_->begin_transaction();
  if (begun.kind == Txn::fenced) {
    end("beginning a transaction: " + begun.error, std::move(batch));
    return;
  }
  if (begun.kind != Txn::ok) {
    rebuild(std::move(batch), "beginning a transaction: " + begun.error, began_ms);
    return;
  }
  produce_all(batch);
  linger(batch);
  last_commit_ = std::chrono::steady_clock::now();
  auto outcome = producer_->commit_transaction(options_.timeout_ms);
  while (outcome.kind == Txn::retry) {
    {
      std::lock_guard lock(mutex_);
      if (abort_) break;  // a lost shard: leave the outcome to the next owner's producer
    }
    spdlog::debug("shard {}: commit not answered yet ({}); asking again", options_.shard, outcome.error);
    outcome = producer_->commit_transaction(options_.timeout_ms);
  }
  if (outcome.kind == Txn::retry) {  // abandoned by stop(true)
    report_all(batch, DeliveryError::fenced, "shard " + options_.shard + " lost while its transaction was committing");
    return;
  }
  {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - last_commit_;
    std::lock_guard lock(stats_mutex_);
    commit_latency_.observe(took.count());
  }
  if (outcome.kind == Txn::ok) {
    committed_.fetch_add(1, std::memory_order_relaxed);
    // Committed: each record that entered the transaction is visible now. One refused at
    // enqueue time never entered it, and keeps its failure.
    std::vector<DeliveryReport> done;
    done.reserve(batch.size());
    for (const auto& rec : batch) {
      DeliveryReport r;
      const auto it = reports_.find(rec.tag);
      if (it != reports_.end()) r = it->second;
      r.tag = rec.tag;
      r.topic = rec.topic;
      if (outside_.count(rec.tag) == 0) {
        r.ok = true;
        r.error_class = DeliveryError::none;
        r.error.clear();
      }
      done.push_back(std::move(r));
    }
    post(std::move(done));
    return;
  }
  if (outcome.kind == Txn::fenced) {
    end("committing: " + outcome.error, std::move(batch));
    return;
  }
  if (outcome.kind == Txn::fatal) {
    rebuild(std::move(batch), "committing: " + outcome.error, began_ms);
    return;
  }
  // Aborted: none of its records is visible. The records that failed are reported with their
  // own errors; the others go again in the next transaction, unless nothing of the batch failed
  // (the transaction itself did: the coordinator's timeout, a log record), when they all are
  // reported transient.
  const auto aborted = producer_->abort_transaction(options_.timeout_ms);
  if (aborted.kind == Txn::fenced) {
    end("aborting: " + aborted.error, std::move(batch));
    return;
  }
  if (aborted.kind != Txn::ok) {
    // Not known to be aborted (the abort itself failed, or the transaction needs a new epoch).
    rebuild(std::move(batch), "aborting (" + outcome.error + "): " + aborted.error, began_ms);
    return;
  }
  aborted_.fetch_add(1, std::memory_order_relaxed);
  std::vector<DeliveryReport> failed;
  std::vector<connectors::OutRecord> again;
  for (auto& rec : batch) {
    const auto it = reports_.find(rec.tag);
    if (it != reports_.end() && own_failure(it->second)) {
      failed.push_back(it->second);
    } else {
      again.push_back(std::move(rec));
    }
  }
  if (failed.empty()) {
    const std::string why =
        "transaction aborted: " + (log_failure_ ? "delivery log record: " + log_failure_->error : outcome.error);
    report_all(again, log_failure_ ? log_failure_->error_class : DeliveryError::transient, why);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    for (auto it = again.rbegin(); it != again.rend(); ++it) outbox_.push_front(restamped(std::move(*it)));
    in_transaction_ -= again.size();
  }
  post(std::move(failed));
}

void ShardStream::end(const std::string& why, std::vector<connectors::OutRecord> batch) {
  {
    std::lock_guard lock(mutex_);
    problem_ = why;
    for (auto& rec : outbox_) batch.push_back(std::move(rec));
    outbox_.clear();
  }
  state_ = State::ended;
  spdlog::warn("shard {}: its transactions ended ({}): {} records not written; the shard is given up", options_.shard,
               why, batch.size());
  report_all(batch, DeliveryError::fenced, "shard " + options_.shard + " fenced: " + why);
}

void ShardStream::report_all(const std::vector<connectors::OutRecord>& records, DeliveryError error,
                             const std::string& why) {
  if (records.empty()) return;
  std::vector<DeliveryReport> out;
  out.reserve(records.size());
  for (const auto& rec : records) {
    DeliveryReport r;
    r.tag = rec.tag;
    r.topic = rec.topic;
    r.ok = false;
    r.error_class = error;
    r.error = why;
    out.push_back(std::move(r));
  }
  post(std::move(out));
}

void ShardStream::post(std::vector<DeliveryReport> reports) {
  {
    std::lock_guard lock(mutex_);
    in_transaction_ -= std::min(in_transaction_, reports.size());
  }
  post_(std::move(reports));
  if (wake_) wake_();
}

}  // namespace delayd::broker
