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
  for (std::uint64_t i = 1; i <= kOld; ++i) sink.produce(ready_record(ready, "old-" + std::to_string(i), i), shard);
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
  sink.produce(ready_record(ready, "new-1", kOld + 1), shard);
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
  using namespace std::chrono_literals;
  const std::string ready = connectors::test::create_topic("stl-ready", 1);
  const std::string log = connectors::test::create_topic("stl-log", 1);

  std::mutex mutex;
  std::vector<DeliveryReport> reports;
  broker::ShardStream::Options o;
  o.shard = "stl-ingest:0";
  o.producer = connectors::test::base_props();
  o.producer.emplace_back("transactional.id", connectors::test::unique_name("stl-txn"));
  o.producer.emplace_back("transaction.timeout.ms", "10000");
  o.reader = connectors::test::base_props();
  o.log_topic = log;
  // Longer than each of the test's waits (30 s): a record reported within one was not held by the
  // linger, and records queued within it all join the open transaction (under the sanitizers
  // too), until the stop commits it.
  o.linger_ms = 60000;
  broker::ShardStream stream(
      std::move(o),
      [&](std::vector<DeliveryReport> r) {
        std::lock_guard lock(mutex);
        reports.insert(reports.end(), r.begin(), r.end());
      },
      [] {});
  auto wait_for = [](auto done) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline && !done()) std::this_thread::sleep_for(5ms);
    return done();
  };
  auto reported = [&] {
    std::lock_guard lock(mutex);
    return reports.size();
  };
  REQUIRE(wait_for([&] { return stream.state() == broker::ShardStream::State::open; }));

  // A record with no commit before it within the linger (a lone record after a quiet spell) is
  // not held: it commits alone, at once.
  stream.produce(ready_record(ready, "l-0", 100));
  REQUIRE(wait_for([&] { return reported() == 1; }));
  CHECK(stream.committed() == 1);
  CHECK(stream.commit_latency().count == 1);  // counted before its records are reported

  // Within the linger of that commit, one record begins a transaction that stays open; the rest
  // are queued once it was taken into it, and the stop commits them all together.
  constexpr std::uint64_t kRecords = 10;
  stream.produce(ready_record(ready, "l-1", 1));
  REQUIRE(wait_for([&] { return stream.queued() == 0; }));
  CHECK(reported() == 1);  // its transaction is open: nothing more is reported before the commit
  for (std::uint64_t i = 2; i <= kRecords; ++i) stream.produce(ready_record(ready, "l-" + std::to_string(i), i));
  REQUIRE(wait_for([&] { return stream.queued() == 0; }));
  CHECK(reported() == 1);
  stream.stop(false);
  REQUIRE(wait_for([&] { return reported() == kRecords + 1; }));
  for (const auto& r : reports) CHECK(r.ok);
  CHECK(stream.committed() == 2);
  REQUIRE(wait_for([&] { return stream.done(); }));
  // Each commit's time is counted once.
  const broker::DurationHistogram commits = stream.commit_latency();
  CHECK(commits.count == 2);
  CHECK(commits.sum_seconds > 0);
}
