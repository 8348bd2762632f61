// ShardTransactions against the real Kafka (scripts/stack.sh up): a shard lost and opened again
// by the same instance. The old stream's records come back `fenced` (its stop, or the new
// stream's init fencing it); that must not read as the shard's new stream being fenced (the fire
// path would give the shard up, and once did, leaving it owned by nobody), so they are reported
// possibly_persisted, while the new stream opens and commits.
#include "broker/shard_transactions.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "broker/delivery_tags.hpp"
#include "broker/wall_clock.hpp"
#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_test_support.hpp"
#include "connectors/topic_reader.hpp"
#include "contract/ingest_parse.hpp"

using namespace delayd;
using connectors::DeliveryError;
using connectors::DeliveryReport;
using connectors::OutRecord;

namespace {

OutRecord ready_record(const std::string& topic, const std::string& job_id, std::uint64_t seq) {
  OutRecord r;
  r.topic = topic;
  r.partition = 0;
  r.value = "v-" + job_id;
  r.headers.push_back({std::string(contract::kHeaderJobId), job_id});
  r.headers.push_back({std::string(contract::kHeaderAttempt), std::string("1")});
  r.tag = broker::make_tag(broker::TagKind::ready, seq);
  return r;
}

// A sink's options: every shard's producer with the transactional id `txn_id`, its log on
// partition 0 of `log`.
broker::ShardTransactions::Options options(const std::string& txn_id, const std::string& log) {
  broker::ShardTransactions::Options o;
  o.producer = [txn_id](const std::string&) {
    auto p = connectors::test::base_props();
    p.emplace_back("transactional.id", txn_id);
    p.emplace_back("transaction.timeout.ms", "10000");
    return p;
  };
  o.reader = connectors::test::base_props();
  o.log_of = [log](const std::string&) { return std::pair<std::string, std::int32_t>{log, 0}; };
  return o;
}

// Polls `done` every 5 ms for up to 30 s; its last answer.
template <typename Done>
bool wait_for(Done done) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline && !done()) std::this_thread::sleep_for(5ms);
  return done();
}

// A lone ShardStream of the shard `name`-ingest:0 (its own transactional id, its ready and log
// topics of one partition each) lingering `linger_ms` (`late_linger_ms` while its records go
// late) with the gate `min_records`, and the reports it posted.
struct LingeringStream {
  LingeringStream(const std::string& name, std::int64_t linger_ms, int min_records, std::int64_t late_linger_ms = 0)
      : ready(connectors::test::create_topic(name + "-ready", 1)),
        stream(
            make_options(name, linger_ms, min_records, late_linger_ms),
            [this](std::vector<DeliveryReport> r) {
              std::lock_guard lock(mutex);
              reports.insert(reports.end(), r.begin(), r.end());
            },
            [] {}) {}
  std::size_t reported() {
    std::lock_guard lock(mutex);
    return reports.size();
  }
  static broker::ShardStream::Options make_options(const std::string& name, std::int64_t linger_ms, int min_records,
                                                   std::int64_t late_linger_ms) {
    broker::ShardStream::Options o;
    o.shard = name + "-ingest:0";
    o.producer = connectors::test::base_props();
    o.producer.emplace_back("transactional.id", connectors::test::unique_name(name + "-txn"));
    o.producer.emplace_back("transaction.timeout.ms", "10000");
    o.reader = connectors::test::base_props();
    o.log_topic = connectors::test::create_topic(name + "-log", 1);
    o.linger_ms = linger_ms;
    o.linger_min_records = min_records;
    o.late_linger_ms = late_linger_ms;
    return o;
  }

  const std::string ready;
  std::mutex mutex;
  std::vector<DeliveryReport> reports;  // guarded by mutex
  broker::ShardStream stream;           // last: it posts into the above
};

}  // namespace

TEST_CASE("a shard closed as lost and opened again: the old stream's records are not the new one's fence",
          "[kafka][transactions]") {
  using namespace std::chrono_literals;
  const std::string ready = connectors::test::create_topic("st-ready", 1);
  const std::string log = connectors::test::create_topic("st-log", 1);
  const std::string shard = "st-ingest:0";
  const std::string txn_id = connectors::test::unique_name("st-txn");

  std::map<std::uint64_t, DeliveryReport> reports;
  broker::ShardTransactions::Options o = options(txn_id, log);
  broker::ShardTransactions sink(std::move(o), [&](const DeliveryReport& r) { reports[r.tag] = r; });

  // The first stream: records queued while it opens, then the shard is lost (closed at once)
  // and opened again before any of its reports is served.
  constexpr std::uint64_t kOld = 20;
  sink.open(shard, {});
  for (std::uint64_t i = 1; i <= kOld; ++i) sink.produce(ready_record(ready, "old-" + std::to_string(i), i), shard, 0);
  sink.close(shard, true);
  sink.open(shard, {});

  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline && (reports.size() < kOld || !sink.opened(shard).ready)) {
    sink.poll(50);
  }
  REQUIRE(reports.size() == kOld);
  std::size_t fenced = 0, committed = 0, unknown = 0;
  for (const auto& [tag, r] : reports) {
    if (r.ok) ++committed;
    if (r.error_class == DeliveryError::fenced) ++fenced;
    if (r.error_class == DeliveryError::possibly_persisted) ++unknown;
  }
  INFO("old stream's reports: " << committed << " ok, " << unknown << " possibly persisted, " << fenced << " fenced");
  CHECK(fenced == 0);
  CHECK(committed + unknown == kOld);
  REQUIRE(sink.opened(shard).ready);

  // The new stream is the shard's and commits.
  const std::uint64_t tag = broker::make_tag(broker::TagKind::ready, kOld + 1);
  sink.produce(ready_record(ready, "new-1", kOld + 1), shard, 0);
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until && reports.count(tag) == 0) sink.poll(50);
  INFO("the new stream: " << (sink.opened(shard).ready ? "open" : sink.opened(shard).problem) << ", "
                          << sink.unconfirmed().size() << " unconfirmed");
  REQUIRE(reports.count(tag) == 1);
  CHECK(reports[tag].ok);
  sink.close(shard, false);
}

TEST_CASE("with a transaction linger, a lone record commits at once and records queued soon after commit together",
          "[kafka][transactions]") {
  // A linger longer than each of the test's waits (30 s): a record reported within one was not
  // held by the linger, and records queued within it all join the open transaction (under the
  // sanitizers too), until the stop commits it. Every transaction lingers, however sparse the
  // shard (the rate gate has a case of its own below).
  LingeringStream s("stl", 60000, 0);
  broker::ShardStream& stream = s.stream;
  REQUIRE(wait_for([&] { return stream.state() == broker::ShardStream::State::open; }));

  // A record with no commit before it within the linger (a lone record after a quiet spell) is
  // not held: it commits alone, at once.
  stream.produce(ready_record(s.ready, "l-0", 100));
  REQUIRE(wait_for([&] { return s.reported() == 1; }));
  CHECK(stream.committed() == 1);
  CHECK(stream.commit_latency().count == 1);  // counted before its records are reported

  // Within the linger of that commit, one record begins a transaction that stays open; the rest
  // wait in the outbox while the stream's thread sleeps through the linger, and the stop
  // commits them all together, each with the time it was queued as its timestamp, not the
  // commit's.
  constexpr std::uint64_t kRecords = 10;
  const std::int64_t queued_from_ms = broker::system_now_ms();
  stream.produce(ready_record(s.ready, "l-1", 1));
  REQUIRE(wait_for([&] { return stream.queued() == 0; }));
  CHECK(s.reported() == 1);  // its transaction is open: nothing more is reported before the commit
  for (std::uint64_t i = 2; i <= kRecords; ++i) stream.produce(ready_record(s.ready, "l-" + std::to_string(i), i));
  const std::int64_t queued_to_ms = broker::system_now_ms();
  CHECK(stream.queued() == kRecords - 1);  // not taken: nothing wakes the thread before the linger's end
  CHECK(s.reported() == 1);
  // The commit comes after the clock has moved past the last queueing, so that a timestamp taken
  // at the commit would fall outside [queued_from_ms, queued_to_ms].
  REQUIRE(wait_for([&] { return broker::system_now_ms() > queued_to_ms + 5; }));
  stream.stop(false);
  REQUIRE(wait_for([&] { return s.reported() == kRecords + 1; }));
  for (const auto& r : s.reports) CHECK(r.ok);
  CHECK(stream.committed() == 2);
  for (std::size_t i = 1; i < s.reports.size(); ++i) {
    INFO("record " << s.reports[i].tag << " timestamp " << s.reports[i].timestamp_ms << " queued within ["
                   << queued_from_ms << ", " << queued_to_ms << "]");
    CHECK(s.reports[i].timestamp_ms >= queued_from_ms);
    CHECK(s.reports[i].timestamp_ms <= queued_to_ms);
  }
  REQUIRE(wait_for([&] { return stream.done(); }));
  // Each commit's time is counted once.
  const broker::DurationHistogram commits = stream.commit_latency();
  CHECK(commits.count == 2);
  CHECK(commits.sum_seconds > 0);
}

TEST_CASE("with a transaction linger, a sparse shard's records commit at once, one by one", "[kafka][transactions]") {
  // A linger far longer than the test, and the gate a million records a linger: far more than
  // this shard takes, so each record commits as soon as it is taken, linger or not.
  LingeringStream s("sts", 60000, 1'000'000);
  broker::ShardStream& stream = s.stream;
  REQUIRE(wait_for([&] { return stream.state() == broker::ShardStream::State::open; }));
  constexpr std::size_t kRecords = 5;
  for (std::size_t i = 1; i <= kRecords; ++i) {
    // Each within the linger of the previous commit: reported without a stop, so not held.
    stream.produce(ready_record(s.ready, "s-" + std::to_string(i), i));
    REQUIRE(wait_for([&] { return s.reported() == i; }));
  }
  CHECK(stream.committed() == kRecords);
  for (const auto& r : s.reports) CHECK(r.ok);
  stream.stop(false);
  REQUIRE(wait_for([&] { return stream.done(); }));
}

TEST_CASE(
    "with a late linger, a shard whose records go late holds its transaction open longer, and on time the linger only",
    "[kafka][transactions]") {
  using namespace std::chrono_literals;
  // A linger of 1 ms, and a late linger far longer than the test for records at least a minute
  // late. Every transaction lingers, however sparse the shard.
  constexpr std::int64_t kLate = 60'000;
  constexpr std::uint64_t kRecords = 10;
  SECTION("late records: the transaction stays open past the linger, until the stop commits it") {
    LingeringStream s("stk", 1, 0, kLate);
    broker::ShardStream& stream = s.stream;
    REQUIRE(wait_for([&] { return stream.state() == broker::ShardStream::State::open; }));
    stream.produce(ready_record(s.ready, "k-0", 100), kLate);  // a lone record: commits at once
    REQUIRE(wait_for([&] { return s.reported() == 1; }));
    stream.produce(ready_record(s.ready, "k-1", 1), kLate);  // begins a transaction
    REQUIRE(wait_for([&] { return stream.queued() == 0; }));
    for (std::uint64_t i = 2; i <= kRecords; ++i) {
      stream.produce(ready_record(s.ready, "k-" + std::to_string(i), i), kLate);
    }
    // 300 linger_ms later: with the linger alone the transaction would have committed by now.
    const auto until = std::chrono::steady_clock::now() + 300ms;
    REQUIRE(wait_for([&] { return std::chrono::steady_clock::now() >= until; }));
    CHECK(s.reported() == 1);
    CHECK(stream.queued() == kRecords - 1);
    stream.stop(false);
    REQUIRE(wait_for([&] { return s.reported() == kRecords + 1; }));
    for (const auto& r : s.reports) CHECK(r.ok);
    CHECK(stream.committed() == 2);
    REQUIRE(wait_for([&] { return stream.done(); }));
  }
  SECTION("records on time (or late by less than the late linger) commit after the linger, without a stop") {
    LingeringStream s("stn", 1, 0, kLate);
    broker::ShardStream& stream = s.stream;
    REQUIRE(wait_for([&] { return stream.state() == broker::ShardStream::State::open; }));
    for (std::uint64_t i = 0; i <= kRecords; ++i) {
      stream.produce(ready_record(s.ready, "n-" + std::to_string(i), i + 1), i % 2 == 0 ? 0 : kLate - 1);
    }
    REQUIRE(wait_for([&] { return s.reported() == kRecords + 1; }));
    for (const auto& r : s.reports) CHECK(r.ok);
    stream.stop(false);
    REQUIRE(wait_for([&] { return stream.done(); }));
  }
}

TEST_CASE("a record queued again after its transaction aborted carries the time it was sent again as its timestamp",
          "[kafka][transactions]") {
  // A topic that refuses records over 1 000 bytes: a larger record there fails on its own at the
  // commit, the transaction aborts, and the record beside it (another topic, which takes it) goes
  // again in the next transaction; its Kafka timestamp is then, not when it was first queued.
  LingeringStream s("str", 60000, 0);
  broker::ShardStream& stream = s.stream;
  const std::string small = connectors::test::unique_name("str-small");
  connectors::KafkaAdmin(connectors::test::base_props()).ensure_topics({small}, 1, 1, {{"max.message.bytes", "1000"}});
  REQUIRE(wait_for([&] { return stream.state() == broker::ShardStream::State::open; }));
  stream.produce(ready_record(s.ready, "r-0", 100));  // a lone record: committed at once
  REQUIRE(wait_for([&] { return s.reported() == 1; }));

  const std::int64_t first_queued_ms = broker::system_now_ms();
  stream.produce(ready_record(s.ready, "r-1", 1));  // begins a transaction that lingers
  OutRecord big = ready_record(small, "r-2", 2);
  big.value = std::string(5000, 'x');
  stream.produce(big);
  REQUIRE(wait_for([&] { return broker::system_now_ms() > first_queued_ms + 5; }));
  const std::int64_t stopped_ms = broker::system_now_ms();
  stream.stop(false);  // ends the linger: the commit fails on r-2, and r-1 goes again
  REQUIRE(wait_for([&] { return s.reported() == 3; }));
  REQUIRE(wait_for([&] { return stream.done(); }));
  CHECK(stream.aborted() == 1);
  std::map<std::uint64_t, DeliveryReport> by_tag;
  for (const auto& r : s.reports) by_tag[r.tag] = r;
  const DeliveryReport& again = by_tag.at(broker::make_tag(broker::TagKind::ready, 1));
  CHECK(again.ok);
  INFO("timestamp " << again.timestamp_ms << ", first queued " << first_queued_ms << ", stopped " << stopped_ms);
  CHECK(again.timestamp_ms >= stopped_ms);
  CHECK_FALSE(by_tag.at(broker::make_tag(broker::TagKind::ready, 2)).ok);
}
