// Idempotency by job-id, and the three moments of a cancel: before due (wins), after delivery
// (changes nothing), for an unknown id (ignored). Ordering within a partition is relied on:
// records with the same key land in the same partition and are processed in order, so a
// "marker" job published after a request shows when the request has been handled.
#include "harness.hpp"

#include <catch2/catch.hpp>

using namespace delayd::e2e;

namespace {

int count_id(const std::vector<delayd::connectors::Record>& recs, const std::string& id) {
  int n = 0;
  for (const auto& r : recs) n += header(r, "job-id") == id ? 1 : 0;
  return n;
}

}  // namespace

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

  REQUIRE(ready.collect_until([](const auto& recs) { return count_id(recs, "done") == 1; }, std::chrono::seconds(30)));
  pub.send_cancel("done");
  // Same key as the cancel: its delivery proves the cancel was processed.
  pub.send(job_at("marker", now_ms(), "m", "done"));
  pub.flush();
  REQUIRE(ready.collect_until([](const auto& recs) { return count_id(recs, "marker") == 1; }, std::chrono::seconds(30)));

  // Wait past the doomed job's time plus a margin, and past the second "dup"'s time.
  const std::int64_t settle_until = t0 + 3000 + 2000;
  ready.collect_until([&](const auto&) { return now_ms() >= settle_until; }, std::chrono::seconds(30));

  CHECK(delayd.stop() == 0);  // settles the last acknowledgements in Redis
  CHECK(count_id(ready.records(), "dup") == 1);
  for (const auto& r : ready.records()) {
    if (header(r, "job-id") == "dup") CHECK(r.value == "first");
  }
  CHECK(count_id(ready.records(), "doomed") == 0);
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
  REQUIRE(ready.collect_until([](const auto& recs) { return count_id(recs, "after-it") == 1; }, std::chrono::seconds(30)));
  ready.collect_until([&](const auto&) { return now_ms() >= at + 1000; }, std::chrono::seconds(10));
  CHECK(delayd.stop() == 0);
  CHECK(count_id(ready.records(), "first-the-cancel") == 0);
  CHECK(redis.field("first-the-cancel", "state") == "cancelled");
  CHECK(redis.field("first-the-cancel", "deliver_at") == std::to_string(at));  // the job's own fields are kept
  CHECK(redis.field("first-the-cancel", "business") == "orders");
}
