// The etf1 and Chronos drop-in (docs/producing.md, "Drop-in for etf1 and Chronos") and delayd's own
// op: upsert, end to end: the real delayd reads a schedules topic in the peer's format and
// delivers to the topics its records name. Each case says which of the peer's tests or issues
// it comes from. For every delivery: never before its due time (etf1's own tests allow a second
// either way); how late each was is printed, not asserted (timing targets are the benchmarks').
#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <map>
#include <set>

#include "contract/time_format.hpp"
#include "harness.hpp"

using namespace delayd::e2e;
using delayd::connectors::Header;
using delayd::connectors::Headers;
using delayd::connectors::OutRecord;
using delayd::connectors::Record;

namespace {

using Records = std::vector<Record>;

std::int64_t now_s() { return now_ms() / 1000; }

// A world whose delayd reads, besides its own ingest topic, `topic` in `format`.
std::string with_peer_topic(World& w, const std::string& format) {
  const std::string topic = w.ingest_topic + "." + format;
  w.settings["DELAYD_KAFKA_INGEST_TOPICS"] = topic + ":" + format;
  w.create_ingest_topic(topic, 4);
  return topic;
}

// An etf1 schedule (its README's example record): key = id, due at epoch_s, to `target`.
OutRecord etf1(const std::string& topic, const std::string& id, std::int64_t epoch_s, const std::string& target,
               std::optional<std::string> value, Headers extra = {}) {
  OutRecord r;
  r.topic = topic;
  r.key = id;
  r.value = std::move(value);
  r.headers = {{"scheduler-epoch", std::to_string(epoch_s)}, {"scheduler-target-topic", target}};
  r.headers.insert(r.headers.end(), extra.begin(), extra.end());
  return r;
}

OutRecord tombstone(const std::string& topic, const std::string& id, std::int32_t partition = -1) {
  OutRecord r;
  r.topic = topic;
  r.key = id;
  r.partition = partition;
  return r;
}

std::vector<const Record*> keyed(const Records& recs, const std::string& topic, const std::string& key) {
  std::vector<const Record*> out;
  for (const auto& r : recs) {
    if (r.topic == topic && r.key == key) out.push_back(&r);
  }
  return out;
}

// Lateness of a delivered record against its due time (ms): the record's timestamp is when
// delayd produced it.
std::int64_t late(const Record& r, std::int64_t due_ms) { return r.timestamp_ms - due_ms; }

}  // namespace

TEST_CASE("etf1 schedules: delivery with every header, latest wins both ways, tombstones, reuse, bad records",
          "[e2e][etf1]") {
  World w("etf1");
  const std::string schedules = with_peer_topic(w, "etf1");
  const std::string history = w.ingest_topic + ".history";  // etf1's HISTORY_TOPIC
  w.settings["DELAYD_ETF1_HISTORY_TOPIC"] = history;
  w.create_topics({"target"});
  delayd::connectors::KafkaAdmin(delayd::testing::kafka_client_properties(w.bootstrap)).ensure_topics({history}, 1, 1);
  const std::string target = w.ready_topic("target");
  Collector out(w, {target, w.dlq_topic, schedules, history});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  JobReader redis(w);
  DelaydProcess delayd(w);
  delayd.start();

  const std::int64_t t = now_s() + 3;
  // etf1 README: the record's headers, and scheduler-target-key as the delivered key.
  pub.send_to(etf1(schedules, "plain", t, target, "v-plain", {{"scheduler-target-key", "tk"}, {"trace-id", "abc"}}));
  // TestScheduler_update_epoch: a new epoch for an id replaces the schedule, later or earlier.
  pub.send_to(etf1(schedules, "later", t, target, "v1"));
  pub.send_to(etf1(schedules, "later", t + 2, target, "v2"));
  pub.send_to(etf1(schedules, "earlier", t + 6, target, "v1"));
  pub.send_to(etf1(schedules, "earlier", t, target, "v2"));
  // A null value deletes (etf1 README, "Delete a schedule").
  pub.send_to(etf1(schedules, "tomb", t + 1, target, "never"));
  pub.send_to(tombstone(schedules, "tomb"));
  // etf1 issues 53 and 44: a tombstone that lands in another partition than its schedule.
  pub.send_to([&] {
    OutRecord r = etf1(schedules, "xpart", t + 1, target, "never");
    r.partition = 0;
    return r;
  }());
  pub.send_to(tombstone(schedules, "xpart", 1));
  // etf1 issue 28: past due when read fires at once (etf1.past_due = fire, the default).
  pub.send_to(etf1(schedules, "past", now_s() - 10, target, "v-past"));
  // Its client retries under the same id: reused after firing, a new job (below).
  pub.send_to(etf1(schedules, "reuse", t, target, "first"));
  // Invalid: blank id, negative epoch, no target topic (etf1 tests of invalid schedules).
  pub.send_to(etf1(schedules, "", t, target, "blank"));
  pub.send_to(etf1(schedules, "negative", -5, target, "neg"));
  pub.send_to([&] {
    OutRecord r = etf1(schedules, "no-target", t, target, "nt");
    r.headers.pop_back();
    return r;
  }());
  pub.flush();
  const std::int64_t past_sent = now_ms();

  REQUIRE(
      out.collect_until([&](const Records& r) { return !of(r, target, "reuse").empty(); }, std::chrono::seconds(30)));
  pub.send_to(etf1(schedules, "reuse", now_s() + 2, target, "second"));
  pub.flush();
  const bool all = out.collect_until(
      [&](const Records& r) {
        return of(r, target, "reuse").size() == 2 && !of(r, target, "earlier").empty() &&
               !of(r, target, "later").empty() && !of(r, target, "plain").empty() && !of(r, target, "past").empty();
      },
      std::chrono::seconds(30));
  CHECK(all);
  out.collect_until([](const Records&) { return false; }, std::chrono::milliseconds(1500));  // anything extra
  const Records& recs = out.records();

  std::vector<std::int64_t> lateness;
  auto once_at = [&](const std::string& id, std::int64_t due_s, const std::string& value) {
    const auto got = of(recs, target, id);
    INFO(id);
    REQUIRE(got.size() == 1);
    CHECK(got[0]->value == value);
    CHECK(got[0]->timestamp_ms >= due_s * 1000);  // never early
    lateness.push_back(late(*got[0], due_s * 1000));
    return got[0];
  };
  const Record* plain = once_at("plain", t, "v-plain");
  CHECK(plain->key == std::optional<std::string>("tk"));
  const Headers input_then_etf1 = {{"scheduler-epoch", std::to_string(t)},
                                   {"scheduler-target-topic", target},
                                   {"scheduler-target-key", "tk"},
                                   {"trace-id", "abc"}};
  Headers head(plain->headers.begin(), plain->headers.begin() + std::min<std::size_t>(plain->headers.size(), 7));
  REQUIRE(head.size() == 7);
  CHECK(Headers(head.begin(), head.begin() + 4) == input_then_etf1);
  CHECK(head[4].name == "scheduler-timestamp");
  CHECK(std::abs(std::stoll(head[4].value.value_or("0")) - past_sent / 1000) <= 2);
  CHECK(head[5] == Header{"scheduler-key", "plain"});
  CHECK(head[6] == Header{"scheduler-topic", schedules});
  CHECK(header(*plain, "job-id") == "plain");
  CHECK(header(*plain, "deliver-at") == std::to_string(t * 1000));
  once_at("later", t + 2, "v2");
  once_at("earlier", t, "v2");
  CHECK(of(recs, target, "tomb").empty());
  CHECK(of(recs, target, "xpart").empty());
  CHECK(redis.field("tomb", "state") == "cancelled");
  CHECK(redis.field("xpart", "state") == "cancelled");
  const auto past = of(recs, target, "past");
  REQUIRE(past.size() == 1);
  CHECK(past[0]->timestamp_ms - past_sent <= 1000);  // at once, not dropped
  const auto reused = of(recs, target, "reuse");
  REQUIRE(reused.size() == 2);
  CHECK(reused[0]->value == "first");
  CHECK(reused[1]->value == "second");
  CHECK(header(*reused[1], "attempt") == "1");  // a new job: its first delivery
  CHECK(reused[1]->timestamp_ms >= std::stoll(header(*reused[1], "deliver-at").value_or("0")));

  // After each delivery a tombstone of the id, in the schedule's own partition, marked as delayd's.
  for (const std::string id : {"plain", "later", "earlier", "past"}) {
    INFO(id);
    const auto stones = keyed(recs, schedules, id);
    const auto tomb = std::find_if(stones.begin(), stones.end(), [](const Record* r) { return !r->value; });
    REQUIRE(tomb != stones.end());
    CHECK(header(**tomb, "delayd-tombstone") == "fired");
    CHECK((*tomb)->partition == stones.front()->partition);
  }
  // etf1.history_topic: a copy of every delivered record.
  for (const std::string id : {"plain", "later", "earlier", "past", "reuse"}) {
    INFO(id);
    const auto copies = of(recs, history, id);
    REQUIRE(copies.size() == of(recs, target, id).size());
    CHECK(copies[0]->value == of(recs, target, id)[0]->value);
    CHECK(copies[0]->headers == of(recs, target, id)[0]->headers);
  }
  // Bad records: dead-lettered with the reason; those with an id tombstoned as invalid.
  const auto dead = [&](const std::string& key) { return keyed(recs, w.dlq_topic, key); };
  REQUIRE(dead("").size() == 1);
  CHECK(header(*dead("")[0], "error") == "etf1 schedule without a key (the schedule id)");
  REQUIRE(dead("negative").size() == 1);
  CHECK_THAT(header(*dead("negative")[0], "error").value_or(""), Catch::Contains("scheduler-epoch"));
  REQUIRE(dead("no-target").size() == 1);
  CHECK_THAT(header(*dead("no-target")[0], "error").value_or(""), Catch::Contains("scheduler-target-topic"));
  for (const std::string id : {"negative", "no-target"}) {
    const auto stones = keyed(recs, schedules, id);
    CHECK(std::count_if(stones.begin(), stones.end(),
                        [](const Record* r) { return !r->value && header(*r, "delayd-tombstone") == "invalid"; }) == 1);
  }
  CHECK(delayd.stop() == 0);

  std::sort(lateness.begin(), lateness.end());
  std::cout << "etf1: " << lateness.size() << " timed deliveries, lateness " << lateness.front() << ".."
            << lateness.back() << " ms\n";
}

TEST_CASE("etf1.past_due = drop drops a schedule produced past due and keeps its earlier version", "[e2e][etf1]") {
  World w("etf1-drop");
  const std::string schedules = with_peer_topic(w, "etf1");
  w.settings["DELAYD_ETF1_PAST_DUE"] = "drop";
  w.settings["DELAYD_ETF1_GRACE_S"] = "5";
  w.create_topics({"target"});
  const std::string target = w.ready_topic("target");
  Collector out(w, {target, schedules});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  DelaydProcess delayd(w);
  delayd.start();

  const std::int64_t t = now_s() + 3;
  // etf1 issues 28, 30, 31: past-due schedules dropped or fired depending on timing. Here the
  // rule is the record's own: produced more than the grace after its epoch, it is dropped.
  pub.send_to(etf1(schedules, "kept", t, target, "v1"));
  pub.send_to(etf1(schedules, "kept", now_s() - 60, target, "too late"));  // dropped: v1 stays
  pub.send_to(etf1(schedules, "gone", now_s() - 60, target, "too late"));
  pub.send_to(etf1(schedules, "grace", now_s() - 2, target, "in grace"));  // within 5 s: fires
  pub.flush();
  REQUIRE(out.collect_until(
      [&](const Records& r) { return !of(r, target, "kept").empty() && !of(r, target, "grace").empty(); },
      std::chrono::seconds(30)));
  out.collect_until([](const Records&) { return false; }, std::chrono::milliseconds(1000));
  const auto kept = of(out.records(), target, "kept");
  REQUIRE(kept.size() == 1);
  CHECK(kept[0]->value == "v1");
  CHECK(kept[0]->timestamp_ms >= t * 1000);
  CHECK(of(out.records(), target, "gone").empty());
  const auto stones = keyed(out.records(), schedules, "gone");
  CHECK(std::count_if(stones.begin(), stones.end(),
                      [](const Record* r) { return !r->value && header(*r, "delayd-tombstone") == "dropped"; }) == 1);
  CHECK(delayd.stop() == 0);
}

TEST_CASE("etf1: 1 000 schedules, half cancelled while delayd is down, each fired once across a kill -9 and a re-read",
          "[e2e][etf1]") {
  World w("etf1-down");
  const std::string schedules = with_peer_topic(w, "etf1");
  w.create_topics({"target"});
  const std::string target = w.ready_topic("target");
  Collector out(w, {target});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  constexpr int kJobs = 1000;
  // Published while no delayd runs (etf1 issue 44: deletes made while the scheduler was down
  // must hold after it starts); the tombstones in the schedules' own partitions (by key).
  const std::int64_t t = now_s() + 12;
  for (int i = 0; i < kJobs; ++i) pub.send_to(etf1(schedules, "s-" + std::to_string(i), t, target, "v"));
  for (int i = 0; i < kJobs; i += 2) pub.send_to(tombstone(schedules, "s-" + std::to_string(i)));
  // Deleted, then created again (and, first, deleted before ever being created): the latest
  // record of each id wins, read once or read again.
  constexpr int kAgain = 10;
  for (int i = 0; i < kAgain; ++i) {
    const std::string id = "r-" + std::to_string(i);
    if (i % 2 == 0) pub.send_to(etf1(schedules, id, t, target, "old"));
    pub.send_to(tombstone(schedules, id));
    pub.send_to(etf1(schedules, id, t, target, "again"));
  }
  pub.flush();

  DelaydProcess first(w);
  first.start();
  const bool half = out.collect_until([&](const Records& r) { return r.size() >= static_cast<std::size_t>(kJobs / 2); },
                                      std::chrono::seconds(40));
  CHECK(half);
  out.collect_until([](const Records&) { return false; }, std::chrono::milliseconds(1500));
  first.kill9();
  // etf1 issues 44 and 53: schedules fired again after a restart. Here nothing may come again,
  // even from an instance of a new group, which reads the whole topic again from its start (as
  // etf1 does at every start): every version is known (vo), delayd's own tombstones ignored.
  w.settings["DELAYD_KAFKA_GROUP_ID"] = w.group + "-again";
  DelaydProcess second(w);
  second.start();
  out.collect_until([](const Records&) { return false; }, std::chrono::seconds(6));
  CHECK(second.stop() == 0);

  std::map<std::string, int> fired;
  std::int64_t worst = 0;
  int again = 0;
  for (const auto& r : out.records()) {
    const std::string id = header(r, "job-id").value_or("?");
    ++fired[id];
    if (id.starts_with("r-")) again += r.value == "again";
    CHECK(r.timestamp_ms >= t * 1000);
    worst = std::max(worst, late(r, t * 1000));
  }
  int twice = 0, cancelled_fired = 0;
  for (const auto& [id, n] : fired) {
    twice += n > 1;
    cancelled_fired += id.starts_with("s-") && std::stoi(id.substr(2)) % 2 == 0;
  }
  std::cout << "etf1 down: " << fired.size() << " fired of " << kJobs << " + " << kAgain << " created again, " << twice
            << " twice, " << cancelled_fired << " cancelled ones fired, worst lateness " << worst << " ms\n";
  CHECK(fired.size() == kJobs / 2 + kAgain);
  CHECK(again == kAgain);
  CHECK(twice == 0);
  CHECK(cancelled_fired == 0);
}

TEST_CASE("Chronos records are delivered unchanged to the output topic, with ids reused, cancels and reschedules",
          "[e2e][chronos]") {
  World w("chronos");
  const std::string in = with_peer_topic(w, "chronos");
  w.create_topics({"out"});
  const std::string output = w.ready_topic("out");
  w.settings["DELAYD_CHRONOS_OUTPUT_TOPIC"] = output;
  Collector out(w, {output, w.dlq_topic});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  JobReader redis(w);
  DelaydProcess delayd(w);
  delayd.start();

  // Chronos README: chronosMessageId and chronosDeadline, RFC 3339; here with an offset.
  auto record = [&](const std::string& id, std::int64_t at_ms, std::string value, Headers extra = {}) {
    OutRecord r;
    r.topic = in;
    r.key = "key-" + id;
    r.value = std::move(value);
    // +01:00: the same instant written in another zone.
    std::string text = delayd::contract::format_rfc3339_ms(at_ms + 3'600'000);
    text.back() = '+';
    text += "01:00";
    r.headers = {{"chronosMessageId", id}, {"chronosDeadline", text}};
    r.headers.insert(r.headers.end(), extra.begin(), extra.end());
    return r;
  };
  const std::int64_t t = now_ms() + 3000;
  pub.send_to(record("c-1", t, "{\"n\": 1}", {{"x-trace", "t1"}}));
  pub.send_to(record("c-gone", t, "x", {}));
  pub.send_to(record("c-gone", t, "x", {{"op", "cancel"}}));
  pub.send_to(record("c-moved", t + 5000, "m", {}));
  pub.send_to(record("c-moved", t + 1000, "m", {{"op", "reschedule"}}));
  OutRecord no_offset = record("c-bad", t, "b");
  no_offset.headers[1].value = "2026-11-24T10:00:00";
  pub.send_to(no_offset);
  pub.flush();
  REQUIRE(out.collect_until([&](const Records& r) { return !of(r, output, "c-1").empty(); }, std::chrono::seconds(30)));
  pub.send_to(record("c-1", now_ms() + 1500, "again"));  // an id used again after it fired
  pub.flush();
  CHECK(out.collect_until(
      [&](const Records& r) { return of(r, output, "c-1").size() == 2 && !of(r, output, "c-moved").empty(); },
      std::chrono::seconds(30)));
  out.collect_until([](const Records&) { return false; }, std::chrono::milliseconds(1000));
  const Records& recs = out.records();

  const auto first = of(recs, output, "c-1");
  REQUIRE(first.size() == 2);
  CHECK(first[0]->key == std::optional<std::string>("key-c-1"));
  CHECK(first[0]->value == std::optional<std::string>("{\"n\": 1}"));  // byte for byte, no JSON rewriting
  CHECK(first[0]->headers[0] == Header{"chronosMessageId", "c-1"});
  CHECK(first[0]->headers[1].name == "chronosDeadline");
  CHECK(first[0]->headers[2] == Header{"x-trace", "t1"});
  CHECK(first[0]->timestamp_ms >= t);
  CHECK(first[1]->value == "again");
  CHECK(of(recs, output, "c-gone").empty());
  CHECK(redis.field("c-gone", "state") == "cancelled");
  const auto moved = of(recs, output, "c-moved");
  REQUIRE(moved.size() == 1);
  CHECK(moved[0]->timestamp_ms >= t + 1000);
  const auto bad = keyed(recs, w.dlq_topic, "key-c-bad");
  REQUIRE(bad.size() == 1);
  CHECK_THAT(header(*bad[0], "error").value_or(""), Catch::Contains("has no UTC offset"));
  CHECK(delayd.stop() == 0);
}

TEST_CASE("op upsert: the latest version of a waiting job is delivered once, and a delivered id is reused",
          "[e2e][upsert]") {
  World w("upsert");
  w.create_topics({"orders"});
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  JobReader redis(w);
  DelaydProcess delayd(w);
  delayd.start();
  auto upsert = [&](const std::string& id, std::int64_t at, const std::string& value) {
    Job j = job_at(id, at, value, id);
    j.extra = {{"op", "upsert"}};
    pub.send(j);
  };
  const std::int64_t t = now_ms() + 3000;
  upsert("later", t, "v1");
  upsert("later", t + 1500, "v2");
  upsert("earlier", t + 4000, "v1");
  upsert("earlier", t, "v2");
  pub.flush();
  REQUIRE(out.collect_until(
      [&](const Records& r) { return !of(r, orders, "later").empty() && !of(r, orders, "earlier").empty(); },
      std::chrono::seconds(30)));
  upsert("later", now_ms() + 1000, "v3");  // after its delivery: a new job of the id
  pub.flush();
  CHECK(out.collect_until([&](const Records& r) { return of(r, orders, "later").size() == 2; },
                          std::chrono::seconds(20)));
  out.collect_until([](const Records&) { return false; }, std::chrono::milliseconds(4500));  // past t + 4000
  const auto later = of(out.records(), orders, "later");
  REQUIRE(later.size() == 2);
  CHECK(later[0]->value == "v2");
  CHECK(later[0]->timestamp_ms >= t + 1500);
  CHECK(later[1]->value == "v3");
  const auto earlier = of(out.records(), orders, "earlier");
  REQUIRE(earlier.size() == 1);
  CHECK(earlier[0]->value == "v2");
  CHECK(earlier[0]->timestamp_ms >= t);
  const auto history = redis.history("later");
  CHECK(std::count_if(history.begin(), history.end(),
                      [](const std::string& l) { return l.find(" scheduled-again ") != std::string::npos; }) == 1);
  CHECK(delayd.stop() == 0);
}
