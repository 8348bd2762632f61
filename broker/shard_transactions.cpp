#include "broker/shard_transactions.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace delayd::broker {

namespace {

// How far before the oldest in-flight entry's claim the log is read from: the claim's stamp and
// the log record's timestamp come from the same instance's clock, so this only covers a clock
// that stepped back between the two.
constexpr std::int64_t kTakeoverSlackMs = 60'000;

}  // namespace

ShardTransactions::ShardTransactions(Options options, connectors::KafkaProducer::ReportHandler on_report)
    : options_(std::move(options)), on_report_(std::move(on_report)) {}

ShardTransactions::~ShardTransactions() {
  for (auto& [shard, s] : streams_) {
    if (s.stream) s.stream->stop(true);
  }
  streams_.clear();  // joins each
  closing_.clear();
}

void ShardTransactions::post(const std::string& shard, std::uint64_t generation,
                             std::vector<connectors::DeliveryReport> reports) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mutex_);
    for (auto& r : reports) reports_.push_back({shard, generation, std::move(r)});
    wake = wake_;
  }
  posted_.notify_all();
  if (wake) wake();
}

void ShardTransactions::wake() {
  std::function<void()> wake;
  {
    std::lock_guard lock(mutex_);
    wake = wake_;
  }
  posted_.notify_all();
  if (wake) wake();
}

void ShardTransactions::on_reports_queued(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wake_ = std::move(wake);
}

void ShardTransactions::produce(const connectors::OutRecord& rec, const std::string& shard, std::int64_t late_ms) {
  ++produced_;
  const auto it = streams_.find(shard);
  if (it != streams_.end() && it->second.stream) {
    it->second.stream->produce(rec, late_ms);  // an ended stream reports it fenced
    return;
  }
  if (it != streams_.end()) {  // not open yet (the fire path waits for opened()): try again later
    connectors::DeliveryReport r;
    r.tag = rec.tag;
    r.topic = rec.topic;
    r.error_class = connectors::DeliveryError::transient;
    r.error = "shard " + shard + "'s transactions are not open yet";
    on_report_(r);
    return;
  }
  // Not ours (never opened, or closed): nothing of it may be written by us.
  connectors::DeliveryReport r;
  r.tag = rec.tag;
  r.topic = rec.topic;
  r.error_class = connectors::DeliveryError::fenced;
  r.error = "shard " + shard + " has no open transactions here";
  on_report_(r);
}

int ShardTransactions::poll(int timeout_ms) {
  std::deque<Posted> taken;
  {
    std::unique_lock lock(mutex_);
    if (reports_.empty() && timeout_ms > 0) {
      posted_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return !reports_.empty(); });
    }
    taken.swap(reports_);
  }
  for (auto& p : taken) {
    const auto current = streams_.find(p.shard);
    const bool stale = current == streams_.end() || current->second.generation != p.generation;
    if (stale && p.report.error_class == connectors::DeliveryError::fenced) {
      // A closed stream's: whether its transaction committed is the next stream's log read to
      // tell (the top of the header); the shard's current stream, if any, is not fenced.
      p.report.error_class = connectors::DeliveryError::possibly_persisted;
      p.report.error = "an earlier stream of shard " + p.shard + " ended: " + p.report.error;
    }
    on_report_(p.report);
  }
  reap();
  return static_cast<int>(taken.size());
}

bool ShardTransactions::flush(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto idle = [this] {
    return std::all_of(streams_.begin(), streams_.end(), [](const auto& s) {
      return !s.second.stream || s.second.stream->idle() || s.second.stream->state() != ShardStream::State::open;
    });
  };
  for (;;) {
    poll(0);
    const bool empty = [this] {
      std::lock_guard lock(mutex_);
      return reports_.empty();
    }();
    if (idle() && empty) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    poll(static_cast<int>(std::min<std::int64_t>(left.count(), 5)));
  }
}

bool ShardTransactions::healthy() {
  reap();
  return true;  // a stream that ends gives its shard up; nothing here stops the process
}

void ShardTransactions::reap() {
  std::erase_if(closing_, [this](const auto& s) {
    if (!s->done()) return false;
    ended_.transactions_committed += s->committed();
    ended_.transactions_aborted += s->aborted();
    ended_.transactions_rebuilt += s->rebuilt();
    ended_.commit.add(s->commit_latency());
    return true;  // joins it
  });
  start_waiting();
}

void ShardTransactions::start_waiting() {
  for (auto& [shard, s] : streams_) {
    if (s.stream) continue;
    const bool ending =
        std::any_of(closing_.begin(), closing_.end(), [&](const auto& c) { return c->shard() == shard && !c->done(); });
    if (!ending) start(shard, s);
  }
}

void ShardTransactions::start(const std::string& shard, Stream& s) {
  const std::uint64_t generation = s.generation;
  s.stream = std::make_unique<ShardStream>(
      std::move(s.waiting),
      [this, shard, generation](std::vector<connectors::DeliveryReport> r) { post(shard, generation, std::move(r)); },
      [this] { wake(); });
}

DeliveryCounters ShardTransactions::counters() const {
  DeliveryCounters c = ended_;
  auto add = [&c](const ShardStream& s) {
    c.transactions_committed += s.committed();
    c.transactions_aborted += s.aborted();
    c.transactions_rebuilt += s.rebuilt();
    c.commit.add(s.commit_latency());
  };
  for (const auto& [shard, s] : streams_) {
    if (s.stream) add(*s.stream);
  }
  for (const auto& s : closing_) add(*s);
  return c;
}

void ShardTransactions::open(const std::string& shard, std::vector<storage::InFlightEntry> earlier) {
  if (auto it = streams_.find(shard); it != streams_.end()) close(shard, true);
  ShardStream::Options o;
  o.shard = shard;
  o.producer = options_.producer(shard);
  o.reader = options_.reader;
  std::tie(o.log_topic, o.log_partition) = options_.log_of(shard);
  o.timeout_ms = options_.timeout_ms;
  o.linger_ms = options_.linger_ms;
  o.late_linger_ms = options_.late_linger_ms;
  if (!earlier.empty()) {
    std::int64_t oldest = earlier.front().firing_at;
    for (const auto& e : earlier) oldest = std::min(oldest, e.firing_at);
    o.takeover_since = std::max<std::int64_t>(oldest - kTakeoverSlackMs, 0);
  }
  earlier_[shard] = std::move(earlier);
  auto& s = streams_[shard];
  s.generation = ++generations_;
  s.waiting = std::move(o);
  reap();  // starts it now unless an earlier stream of the shard is still ending
}

RecordSink::Opened ShardTransactions::opened(const std::string& shard) {
  Opened out;
  const auto it = streams_.find(shard);
  if (it == streams_.end()) {
    out.problem = "not opened";
    return out;
  }
  if (!it->second.stream) {
    reap();
    if (!it->second.stream) {
      out.problem = "waiting for its earlier transactional producer to end";
      return out;
    }
  }
  ShardStream& s = *it->second.stream;
  if (s.state() != ShardStream::State::open) {
    out.problem = s.problem();
    return out;
  }
  out.ready = true;
  // Of the earlier epoch's entries, those whose attempt the log shows (the latest line per job).
  std::map<std::string, LoggedDelivery, std::less<>> logged;
  for (auto& d : s.takeover()) logged[d.job_id] = std::move(d);
  for (const auto& e : earlier_[shard]) {
    const auto found = logged.find(e.job_id);
    if (found != logged.end() && found->second.attempt == e.attempt) out.delivered.push_back(found->second);
  }
  earlier_.erase(shard);
  return out;
}

std::vector<std::string> ShardTransactions::unconfirmed() const {
  std::vector<std::string> out;
  for (const auto& [shard, s] : streams_) {
    if (s.stream && s.stream->state() == ShardStream::State::unconfirmed) out.push_back(shard);
  }
  return out;
}

void ShardTransactions::confirm(const std::string& shard) {
  if (const auto it = streams_.find(shard); it != streams_.end() && it->second.stream) it->second.stream->confirm();
}

void ShardTransactions::close(const std::string& shard, bool lost) {
  earlier_.erase(shard);
  const auto it = streams_.find(shard);
  if (it == streams_.end()) return;
  if (it->second.stream) {
    it->second.stream->stop(lost);
    closing_.push_back(std::move(it->second.stream));
  }
  streams_.erase(it);
}

}  // namespace delayd::broker
