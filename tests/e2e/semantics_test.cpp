// Idempotency by job-id, and the three moments of a cancel: before due (wins), after delivery
// (changes nothing), for an unknown id (remembered as a cancelled record, so that a job arriving
// later with that id is never delivered). Ordering within a partition is relied on:
// records with the same key land in the same partition and are processed in order, so a
// "marker" job published after a request shows when the request has been handled.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>

#include "contract/time_format.hpp"
#include "harness.hpp"

using namespace delayd::e2e;

TEST_CASE("the same job-id twice is delivered once, and cancel wins before due and is void after", "[e2e][cancel]") {
  World w("semantics");
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  Collector ready(w, {w.ready_topic("orders")});

  const std::int64_t t0 = now_ms();
  // Twice the same id, the second with another payload and time: the first publish wins.
  pub.send(job_at("dup", t0 + 1000, "first", "dup"));
  pub.send(job_at("dup", t0 + 1500, "second", "dup"));
  // Cancelled two seconds before it is due.
  pub.send(job_at("doomed", t0 + 3000, "never", "doomed"));
  pub.send_cancel("doomed");
  // Delivered first, cancelled afterwards.
  pub.send(job_at("done", t0 + 500, "delivered", "done"));
  // A cancel for an id nobody published.
  pub.send_cancel("ghost");
  pub.flush();

  REQUIRE(ready.collect_until([](const auto& recs) { return values_of(recs, "done").size() == 1; },
                              std::chrono::seconds(30)));
  pub.send_cancel("done");
  // Same key as the cancel: its delivery proves the cancel was processed.
  pub.send(job_at("marker", now_ms(), "m", "done"));
  pub.flush();
  REQUIRE(ready.collect_until([](const auto& recs) { return values_of(recs, "marker").size() == 1; },
                              std::chrono::seconds(30)));

  // Wait past the doomed job's time plus a margin, and past the second "dup"'s time.
  const std::int64_t settle_until = t0 + 3000 + 2000;
  ready.collect_until([&](const auto&) { return now_ms() >= settle_until; }, std::chrono::seconds(30));

  CHECK(delayd.stop() == 0);  // settles the last acknowledgements in Redis
  CHECK(values_of(ready.records(), "dup").size() == 1);
  for (const auto& r : ready.records()) {
    if (header(r, "job-id") == "dup") CHECK(r.value == "first");
  }
  CHECK(values_of(ready.records(), "doomed").size() == 0);
  CHECK(redis.field("doomed", "state") == "cancelled");
  CHECK(redis.field("doomed", "cancelled_at").has_value());
  CHECK(redis.field("done", "state") == "ready");
  CHECK_FALSE(redis.field("done", "cancelled_at").has_value());
  CHECK(redis.field("dup", "state") == "ready");
  // A cancel for an id nobody published is remembered (its job may be on another partition).
  CHECK(redis.field("ghost", "state") == "cancelled");
  CHECK(redis.field("ghost", "cancelled_early") == "1");
  CHECK_FALSE(redis.field("ghost", "deliver_at").has_value());
}

namespace {

delayd::connectors::OutRecord on_partition(std::int32_t partition, const std::string& id, std::int64_t at) {
  delayd::connectors::OutRecord rec = ingest_record(job_at(id, at, "value of " + id, id));
  rec.partition = partition;
  return rec;
}

}  // namespace

TEST_CASE("a cancel that arrives before its job, on another partition, prevents the delivery", "[e2e][cancel]") {
  World w("early-cancel");
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  Collector ready(w, {w.ready_topic("orders")});
  // Every shard is listed before the first record is read, also those whose producer is still
  // being set up: the cancel is remembered in each (with a shard missing it the job was delivered).
  CHECK(redis.shards().size() == 4);

  delayd::connectors::OutRecord cancel;
  cancel.partition = 1;
  cancel.key = "first-the-cancel";
  cancel.headers = {{"op", "cancel"}, {"job-id", "first-the-cancel"}};
  pub.send_raw(cancel);
  pub.flush();
  // delayd has read the cancel once Redis remembers it.
  REQUIRE(ready.collect_until([&](const auto&) { return redis.field("first-the-cancel", "state") == "cancelled"; },
                              std::chrono::seconds(30)));
  const std::int64_t at = now_ms() + 500;
  pub.send_raw(on_partition(0, "first-the-cancel", at));
  pub.send_raw(on_partition(0, "after-it", at));  // same partition, later: its delivery shows the job was read
  pub.flush();
  REQUIRE(ready.collect_until([](const auto& recs) { return values_of(recs, "after-it").size() == 1; },
                              std::chrono::seconds(30)));
  ready.collect_until([&](const auto&) { return now_ms() >= at + 1000; }, std::chrono::seconds(10));
  CHECK(delayd.stop() == 0);
  CHECK(values_of(ready.records(), "first-the-cancel").size() == 0);
  CHECK(redis.field("first-the-cancel", "state") == "cancelled");
  CHECK(redis.field("first-the-cancel", "deliver_at") == std::to_string(at));  // the job's own fields are kept
  CHECK(redis.field("first-the-cancel", "business") == "orders");
}

// A cancel published right after its job, both read late (delayd was down until after the due
// time): the cancel came first in the partition's order of events that matter to the producer,
// so it wins, although the job is due the moment delayd reads it. Both records come in one
// batch; the cancel is applied before the job could be claimed (it is accepted straight into
// cancelled), never raced against the fire path.
TEST_CASE("a job and its cancel read together after its due time: the cancel wins, nothing is delivered",
          "[e2e][cancel]") {
  World w("late-cancel");
  w.create_topics({"orders"});
  Publisher pub(w);
  constexpr int kJobs = 20;
  const std::int64_t at = now_ms() - 1000;  // due before delayd reads them
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "late-cancel-" + std::to_string(i);
    pub.send_raw(on_partition(i % 2, id, at));
    delayd::connectors::OutRecord cancel;
    cancel.partition = i % 2;
    cancel.key = id;
    cancel.headers = {{"op", "cancel"}, {"job-id", id}};
    pub.send_raw(cancel);
  }
  pub.send_raw(on_partition(0, "after-them-0", at));  // same partitions, later: delivered, so read
  pub.send_raw(on_partition(1, "after-them-1", at));
  pub.flush();
  Collector ready(w, {w.ready_topic("orders")});
  DelaydProcess delayd(w);
  delayd.start();
  REQUIRE(ready.collect_until(
      [](const auto& recs) {
        return values_of(recs, "after-them-0").size() == 1 && values_of(recs, "after-them-1").size() == 1;
      },
      std::chrono::seconds(30)));
  CHECK(delayd.stop() == 0);
  JobReader redis(w);
  int delivered = 0;
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "late-cancel-" + std::to_string(i);
    delivered += static_cast<int>(values_of(ready.records(), id).size());
    CHECK(redis.field(id, "state") == "cancelled");
  }
  CHECK(delivered == 0);
}

namespace {

delayd::connectors::OutRecord twin_on(std::int32_t partition, const std::string& id, std::int64_t at) {
  delayd::connectors::OutRecord rec = ingest_record(job_at(id, at, "p" + std::to_string(partition), id));
  rec.partition = partition;
  return rec;
}

}  // namespace

// Idempotency is per shard: one job-id published to two partitions is two jobs, and both are
// delivered, whichever arrives while the other waits in memory. A cancel keyed to one partition
// cancels that partition's job only.
TEST_CASE("one job-id on two partitions is two jobs: both delivered, a cancel takes its partition's", "[e2e][cancel]") {
  World w("twin-ids");
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  Collector ready(w, {w.ready_topic("orders")});
  REQUIRE(ready.wait_assigned());

  const std::int64_t t0 = now_ms();
  constexpr int kTwins = 20;
  constexpr int kCancelled = 5;
  std::map<std::string, std::int64_t> due;  // "<id>|p<partition>" -> deliver_at
  for (int i = 0; i < kTwins + kCancelled; ++i) {
    const std::string id = "twin-" + std::to_string(i);
    pub.send_raw(twin_on(0, id, t0 + 3000));
    pub.send_raw(twin_on(1, id, t0 + 4000));
    due[id + "|p0"] = t0 + 3000;
    due[id + "|p1"] = t0 + 4000;
  }
  pub.flush();
  for (int i = kTwins; i < kTwins + kCancelled; ++i) {
    delayd::connectors::OutRecord cancel;
    cancel.partition = 1;
    cancel.key = "twin-" + std::to_string(i);
    cancel.headers = {{"op", "cancel"}, {"job-id", *cancel.key}};
    pub.send_raw(cancel);
  }
  pub.flush();

  const std::size_t expected = 2 * kTwins + kCancelled;
  ready.collect_until([&](const auto& recs) { return recs.size() >= expected; }, std::chrono::seconds(30));
  // Past the last due time plus a margin: nothing more arrives (no cancelled job, no duplicate).
  ready.collect_until([&](const auto&) { return now_ms() >= t0 + 6000; }, std::chrono::seconds(10));
  CHECK(delayd.stop() == 0);

  int both = 0;
  for (int i = 0; i < kTwins; ++i) {
    const std::string id = "twin-" + std::to_string(i);
    INFO(id);
    CHECK(values_of(ready.records(), id) == std::vector<std::string>{"p0", "p1"});
    both += values_of(ready.records(), id) == std::vector<std::string>{"p0", "p1"} ? 1 : 0;
  }
  for (int i = kTwins; i < kTwins + kCancelled; ++i) {
    const std::string id = "twin-" + std::to_string(i);
    INFO(id << ": its partition-1 job was cancelled, its partition-0 job was not");
    CHECK(values_of(ready.records(), id) == std::vector<std::string>{"p0"});
  }
  // Never early: each ready record is produced at or after its own job's deliver-at.
  for (const auto& r : ready.records()) {
    const auto at = due.find(header(r, "job-id").value_or("") + "|" + r.value.value_or(""));
    REQUIRE(at != due.end());
    CHECK(r.timestamp_ms >= at->second);
  }
  std::printf("twin ids: %d of %d job-ids delivered on both partitions, %zu ready records (expected %zu)\n", both,
              kTwins, ready.records().size(), expected);
}

// Never early, below the millisecond: an RFC 3339 deliver-at 0.9 ms past a whole millisecond T is
// due at T + 1 (contract/time_format.hpp rounds up), so no ready record is stamped T or earlier.
TEST_CASE("a deliver-at with a fraction finer than a millisecond is never delivered before it", "[e2e][time]") {
  World w("sub-ms");
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  Collector ready(w, {w.ready_topic("orders")});
  REQUIRE(ready.wait_assigned());

  constexpr int kJobs = 60;
  std::map<std::string, std::int64_t> whole_ms;  // job-id -> T, the instant being T + 0.9 ms
  const std::int64_t t0 = now_ms() + 1000;
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "sub-ms-" + std::to_string(i);
    const std::int64_t t = t0 + 7 * i;                          // spread over 420 ms, one job per instant
    std::string text = delayd::contract::format_rfc3339_ms(t);  // "...T10:00:00.123Z"
    text.insert(text.size() - 1, "9");                          // "...T10:00:00.1239Z": T + 0.9 ms
    Job j;
    j.job_id = id;
    j.key = id;
    j.value = "v";
    j.deliver_at = text;
    pub.send(j);
    whole_ms[id] = t;
  }
  pub.flush();
  REQUIRE(ready.collect_until([&](const auto& recs) { return recs.size() >= kJobs; }, std::chrono::seconds(30)));
  CHECK(delayd.stop() == 0);
  int early = 0;
  for (const auto& r : ready.records()) {
    const std::int64_t t = whole_ms.at(header(r, "job-id").value_or(""));
    // A ready record stamped T was produced within [T, T + 1): possibly before T + 0.9 ms.
    if (r.timestamp_ms <= t) ++early;
  }
  std::printf("sub-ms: %d of %zu ready records stamped at or before the whole millisecond of their deliver-at\n", early,
              ready.records().size());
  CHECK(early == 0);
}
