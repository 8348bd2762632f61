// JobStore's job lifecycle (docs/consuming.md, "Job lifecycle"): reports, redelivery,
// reschedule, repeats, upserts, a takeover's logged delivery.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "job_store_fixture.hpp"

using namespace delayd::storage;
using namespace delayd::storage::test;
using namespace delayd::redis;

TEST_CASE_METHOD(Lifecycle, "a kept job goes ready, running, finished, and each report is idempotent",
                 "[store][lifecycle]") {
  const auto t = deliver("a", 10, Mode::keep);
  CHECK(t.state == JobState::ready);
  CHECK(has_payload("a"));  // kept for a redelivery
  CHECK_FALSE(score("a"));  // no ack timeout: nothing waits
  CHECK(report("a", ReportStatus::running, 20).state == JobState::running);
  CHECK(field("a", "running_at") == "20");
  CHECK(report("a", ReportStatus::finished, 30).state == JobState::finished);
  CHECK(field("a", "finished_at") == "30");
  CHECK_FALSE(has_payload("a"));
  CHECK(ttl("a") > 0);
  // Late and duplicate reports change nothing.
  CHECK(report("a", ReportStatus::running, 40).verdict == ReportOutcome::Verdict::ignored);
  CHECK(report("a", ReportStatus::finished, 40).verdict == ReportOutcome::Verdict::ignored);
  CHECK(field("a", "state") == "finished");
  CHECK(field("a", "history") == "10 delivered 1 \n20 running 1 \n30 finished 1 ");
}

TEST_CASE_METHOD(Lifecycle, "reports that do not fit are ignored, unknown ids are unknown", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("d", 100)}, 0);
  CHECK(report("d", ReportStatus::finished, 5).verdict == ReportOutcome::Verdict::ignored);
  CHECK(field("d", "state") == "delay");
  CHECK(report("nobody", ReportStatus::running, 5).verdict == ReportOutcome::Verdict::unknown);
  CHECK_FALSE(store.locate(Ids{"nobody"})[0]);
}

TEST_CASE_METHOD(Lifecycle, "a failed report goes round again at the retry time, then dead on the last attempt",
                 "[store][lifecycle]") {
  deliver("f", 10, Mode::keep);
  const auto o = report("f", ReportStatus::failed, 20, 500, 2);
  CHECK(o.verdict == ReportOutcome::Verdict::applied);
  CHECK(o.state == JobState::delay);
  CHECK_FALSE(o.dead);
  CHECK(o.due_at == 500);
  CHECK(score("f") == 500);
  CHECK(field("f", "not_before") == "500");
  CHECK(field("f", "last_error") == "boom");
  CHECK(misplaced() == Ids{});
  // A replay of its ingest record re-adds a lost entry where the record says: at the retry
  // time, not at its long-passed deliver_at.
  REQUIRE(delayd::testing::drop_pending_entry(redis, keys, shard, "f", 500));
  store.accept(std::vector<NewJob>{job("f", 10)}, 0);
  CHECK(score("f") == 500);
  // The owner is told through the wake list.
  const auto woken = store.take_wakes(std::vector<std::string>{shard});
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].second == std::vector<PendingEntry>{{"f", 500}});
  CHECK(store.take_wakes(std::vector<std::string>{shard}).empty());
  // Never before the retry time, although deliver_at has long passed.
  CHECK(store.claim(shard, Ids{"f"}, 400)[0].kind == Claim::Kind::early);
  auto c = store.claim(shard, Ids{"f"}, 500);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 2);
  CHECK(c[0].not_before == 500);
  CHECK_FALSE(c[0].plain);
  CHECK(c[0].dead_reason.empty());
  const JobStore::Delivered d{"f", c[0].deliver_at, 2, "orders", Mode::keep, {}};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 510);
  // A report about delivery 1 (a replay, or a slow consumer) does not touch delivery 2.
  CHECK(report("f", ReportStatus::failed, 520, 5000, 2, 0, 1).verdict == ReportOutcome::Verdict::ignored);
  CHECK(field("f", "state") == "ready");
  // Attempt 2 of 2 fails: due at once, marked dead for the owner's claim to dead-letter.
  const auto last = report("f", ReportStatus::failed, 600, 5000, 2);
  CHECK(last.dead);
  CHECK(score("f") == 600);
  c = store.claim(shard, Ids{"f"}, 600);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].dead_reason == "reported failed after 2 attempts: boom");
  CHECK(misplaced() == Ids{});
  store.mark_failed(shard, "f", c[0].dead_reason, 610);
  CHECK(field("f", "state") == "failed");
  CHECK(misplaced() == Ids{});
  CHECK(field("f", "error") == "reported failed after 2 attempts: boom");
}

TEST_CASE_METHOD(Lifecycle, "a failed report for a business that keeps no payload fails the job at once",
                 "[store][lifecycle]") {
  deliver("n", 10, Mode::fast);
  const auto o = report("n", ReportStatus::failed, 20, 500, 5);
  CHECK(o.state == JobState::failed);
  CHECK(field("n", "state") == "failed");
  CHECK(field("n", "error").find("scheduler.keep_payload") != std::string::npos);
  CHECK_FALSE(score("n"));
}

TEST_CASE_METHOD(Lifecycle, "an ack timeout redelivers a silent job and running reports push the deadline",
                 "[store][lifecycle]") {
  const auto t = deliver("s", 10, Mode::keep, 1000);
  CHECK(t.at == 1010);
  CHECK(score("s") == 1010);
  CHECK(field("s", "ack_deadline") == "1010");  // the record says where its entry waits
  CHECK(misplaced() == Ids{});
  CHECK(store.claim(shard, Ids{"s"}, 900)[0].kind == Claim::Kind::early);
  report("s", ReportStatus::running, 900, 0, 3, 1000);
  CHECK(score("s") == 1900);  // a heartbeat
  CHECK(field("s", "ack_deadline") == "1900");
  CHECK(misplaced() == Ids{});
  CHECK(store.claim(shard, Ids{"s"}, 1500)[0].kind == Claim::Kind::early);
  auto c = store.claim(shard, Ids{"s"}, 1900);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].redelivery);
  CHECK(c[0].attempt == 2);
  CHECK(c[0].value == std::optional<std::string>("v-s"));
  CHECK(field("s", "redelivered") == "1");
  CHECK(field("s", "history").find("redelivered 1 no report within the ack timeout") != std::string::npos);
  CHECK(field("s", "not_before") == "1900");  // delay again, its entry still at the deadline that passed
  CHECK(misplaced() == Ids{});
  // Reported finished: nothing waits any more.
  const JobStore::Delivered d{"s", c[0].deliver_at, 2, "orders", Mode::keep, std::chrono::milliseconds(1000)};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1950);
  CHECK(score("s") == 2950);
  CHECK(misplaced() == Ids{});
  report("s", ReportStatus::finished, 2000);
  CHECK_FALSE(score("s"));
  CHECK(field("s", "state") == "finished");
  CHECK(field("s", "ack_deadline") == "<nil>");
  CHECK(misplaced() == Ids{});
}

TEST_CASE_METHOD(Lifecycle, "a failure that finds the job delivered already leaves its ack deadline in place",
                 "[store][lifecycle]") {
  // A dead-letter verdict can come back after the job was marked ready (a late report of an
  // earlier produce): the job stays ready, and its consumer's silence must still redeliver it.
  const auto t = deliver("late", 10, Mode::keep, 1000);
  REQUIRE(score("late") == t.at);
  const auto f = store.mark_failed(shard, "late", "gave up", 500);
  CHECK_FALSE(f.changed);
  CHECK(f.state == JobState::ready);
  CHECK(score("late") == t.at);
  CHECK(misplaced() == Ids{});
  const auto c = store.claim(shard, Ids{"late"}, t.at);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].redelivery);
}

TEST_CASE_METHOD(Lifecycle, "an operator's retry of a failed job waits at its not-before time, now",
                 "[store][lifecycle]") {
  deliver("o", 10, Mode::keep);
  report("o", ReportStatus::failed, 20, 30, 1);  // out of attempts: due at once, marked dead
  auto c = store.claim(shard, Ids{"o"}, 30);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  store.mark_failed(shard, "o", c[0].dead_reason, 40, std::nullopt, true);
  REQUIRE(field("o", "state") == "failed");
  CHECK(store.retry_anywhere("o", 5000).changed);
  CHECK(field("o", "state") == "delay");
  CHECK(field("o", "not_before") == "5000");
  CHECK(score("o") == 5000);  // where the console lists it, not at its deliver_at of long ago
  CHECK(misplaced() == Ids{});
  c = store.claim(shard, Ids{"o"}, 5000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].not_before == 5000);
}

TEST_CASE_METHOD(Lifecycle, "silence after the last attempt dead-letters the job instead of delivering it again",
                 "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("z", 10)}, 0);
  auto c = store.claim(shard, Ids{"z"}, 10);
  JobStore::Delivered d{"z", 10, 1, "orders", Mode::keep, std::chrono::milliseconds(100), 2};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 10);
  c = store.claim(shard, Ids{"z"}, 110);  // silence: delivery 2 of 2
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 2);
  CHECK(c[0].dead_reason.empty());
  d.attempt = 2;
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 120);
  c = store.claim(shard, Ids{"z"}, 220);  // silence again: out of attempts
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].redelivery);
  CHECK(c[0].attempt == 2);  // no delivery is added for the dead letter
  CHECK(c[0].dead_reason == "no report within the ack timeout after 2 deliveries");
  CHECK(field("z", "redelivered") == "1");
  CHECK(misplaced() == Ids{});
  store.mark_failed(shard, "z", c[0].dead_reason, 230);
  CHECK(field("z", "state") == "failed");
  CHECK(field("z", "attempt") == "2");
  CHECK(misplaced() == Ids{});
}

TEST_CASE_METHOD(Lifecycle, "a job's history keeps its last hundred lines", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("h", 5000)}, 0);
  for (int i = 1; i <= 103; ++i) REQUIRE(store.reschedule_anywhere(shard, "h", 5000 + i, i).changed);
  const auto history = redis.command({"LRANGE", keys.history(shard, "h"), "0", "-1"});
  REQUIRE(history.view().size() == 100);
  CHECK(std::string(history.view()[0].str()) == "4 rescheduled 0 from%205003%20to%205004");  // the first three left
  CHECK(std::string(history.view()[99].str()) == "103 rescheduled 0 from%205102%20to%205103");
}

TEST_CASE_METHOD(Lifecycle, "reschedule moves a waiting job, not one in flight", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("r", 5000), job("q", 100)}, 0);
  auto t = store.reschedule_anywhere(shard, "r", 200, 10);
  CHECK(t.changed);
  CHECK(score("r") == 200);
  CHECK(field("r", "deliver_at") == "200");
  CHECK(store.claim(shard, Ids{"r"}, 150)[0].kind == Claim::Kind::early);
  store.claim(shard, Ids{"q"}, 100);
  t = store.reschedule_anywhere(shard, "q", 9000, 110);
  CHECK_FALSE(t.changed);
  CHECK(t.state == JobState::in_flight);
  CHECK(store.reschedule_anywhere(shard, "none", 9000, 110).state == JobState::missing);
  CHECK(misplaced() == Ids{});
  const auto woken = store.take_wakes(std::vector<std::string>{shard});
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].second == std::vector<PendingEntry>{{"r", 200}});
}

TEST_CASE_METHOD(Lifecycle, "a repeating job comes back on its grid, skips what passed, and stops at its count",
                 "[store][lifecycle]") {
  accept_every("p", 1000, 500, 4);
  auto c = store.claim(shard, Ids{"p"}, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].repeat == 1);
  CHECK_FALSE(c[0].plain);
  JobStore::Delivered d{"p", 1000, c[0].attempt, "orders", Mode::drop, {}};
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1003)[0];
  CHECK(t.state == JobState::delay);
  CHECK(t.at == 1500);  // deliver_at + 500, not the delivery time + 500
  CHECK(has_payload("p"));
  CHECK(misplaced() == Ids{});
  c = store.claim(shard, Ids{"p"}, 1500);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].deliver_at == 1500);
  CHECK(c[0].attempt == 1);
  // Acknowledged 1.1 s late: occurrences 3 (2000) and 4 (2500) have passed; the latest, 4, is
  // due at once and 3 is skipped.
  d = {"p", 1500, 1, "orders", Mode::drop, {}};
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 2600)[0];
  CHECK(t.at == 2500);
  CHECK(field("p", "repeat") == "4");
  c = store.claim(shard, Ids{"p"}, 2600);
  CHECK(c[0].repeat == 4);
  d = {"p", 2500, 1, "orders", Mode::drop, {}};
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 2601)[0];
  CHECK(t.state == JobState::ready);  // the last of 4
  CHECK_FALSE(score("p"));
  CHECK(misplaced() == Ids{});
  // Reports are not tracked for repeating jobs, the last occurrence included.
  CHECK(report("p", ReportStatus::finished, 2600).verdict == ReportOutcome::Verdict::ignored);
}

TEST_CASE_METHOD(Lifecycle, "a calendar repeat keeps its rule in the record and goes on where the broker says",
                 "[store][lifecycle][cron]") {
  NewJob j = job("k", 10'000);
  j.repeat.cron = "*/10 * * * * *";
  j.repeat.tz = "Europe/Berlin";
  j.repeat.until = 60'000;
  j.repeat.count = 9;
  j.repeat.catchup = Catchup::all;
  store.accept(std::vector<NewJob>{j}, 0);
  CHECK(field("k", "repeat_cron") == "*/10 * * * * *");  // stored percent-encoded, shown as written
  CHECK(field("k", "repeat_tz") == "Europe/Berlin");
  CHECK(field("k", "repeat_catchup") == "all");
  auto c = store.claim(shard, Ids{"k"}, 10'000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK_FALSE(c[0].plain);
  CHECK(c[0].repeat == 1);
  CHECK(c[0].rule.cron == j.repeat.cron);
  CHECK(c[0].rule.tz == "Europe/Berlin");
  CHECK(c[0].rule.until == std::optional<std::int64_t>(60'000));
  CHECK(c[0].rule.count == 9);
  CHECK(c[0].rule.catchup == Catchup::all);
  CHECK(c[0].rule.caught_up == 0);
  // The broker chose the next occurrence (20 000, number 2), already due: a missed one caught up.
  JobStore::Delivered d{"k", 10'000, c[0].attempt, "orders", Mode::drop, {}};
  d.next_known = true;
  d.next = Occurrence{20'000, 2};
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 25'000)[0];
  CHECK(t.state == JobState::delay);
  CHECK(t.at == 20'000);
  CHECK(field("k", "repeat") == "2");
  c = store.claim(shard, Ids{"k"}, 25'000);
  CHECK(c[0].rule.caught_up == 1);
  // Without a choice (a caller that knows only the id), a calendar series cannot go on in Lua: it
  // ends with this delivery, truthfully ready.
  d = {"k", 20'000, c[0].attempt, "orders", Mode::drop, {}};
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 25'001)[0];
  CHECK(t.state == JobState::ready);
}

TEST_CASE_METHOD(Lifecycle, "a missed occurrence is skipped without counting an attempt, or ends the series failed",
                 "[store][lifecycle][cron]") {
  NewJob j = job("s", 1000);
  j.repeat.every = std::chrono::milliseconds(1000);
  j.repeat.catchup = Catchup::none;
  store.accept(std::vector<NewJob>{j}, 0);
  auto c = store.claim(shard, Ids{"s"}, 5500);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 1);
  JobStore::Delivered d{"s", 1000, c[0].attempt, "orders", Mode::drop, {}};
  d.next_known = true;
  d.next = Occurrence{6000, 6};
  d.skip = true;
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 5500)[0];
  CHECK(t.changed);
  CHECK(t.state == JobState::delay);
  CHECK(t.at == 6000);
  CHECK(field("s", "repeat") == "6");
  CHECK(field("s", "attempt") == "0");
  CHECK(field("s", "ready_at") == "<nil>");  // never delivered
  CHECK_THAT(field("s", "history"), Catch::Contains("skipped 0 occurrence 1 due at 1000 missed"));
  CHECK(store.claim(shard, Ids{"s"}, 6000)[0].attempt == 1);  // the in-flight entry went with the skip
  // Nothing left after a missed one: failed, with the reason.
  d = {"s", 6000, 1, "orders", Mode::drop, {}};
  d.next_known = true;
  d.skip = true;
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 9000)[0];
  CHECK(t.state == JobState::failed);
  CHECK_THAT(field("s", "error"), Catch::StartsWith("expired: occurrence 6 due at 6000 was missed"));
  CHECK_FALSE(score("s"));
}

TEST_CASE_METHOD(Lifecycle, "a cancel while an occurrence is in flight ends the series after it",
                 "[store][lifecycle]") {
  accept_every("e", 1000, 100);
  auto c = store.claim(shard, Ids{"e"}, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  const auto t = store.cancel(shard, "e", 1001);
  CHECK(t.changed);
  CHECK(t.state == JobState::in_flight);  // the occurrence under way cannot be recalled
  const JobStore::Delivered d{"e", 1000, 1, "orders", Mode::drop, {}};
  const auto marked = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1005)[0];
  CHECK(marked.state == JobState::cancelled);
  CHECK(field("e", "state") == "cancelled");
  CHECK_FALSE(score("e"));
}

TEST_CASE_METHOD(Lifecycle, "a report for a job whose delivery is not settled yet waits", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("w", 10)}, 0);
  store.claim(shard, Ids{"w"}, 10);  // produced, say, and read by a fast consumer
  CHECK(report("w", ReportStatus::finished, 12).verdict == ReportOutcome::Verdict::wait);
  CHECK(field("w", "state") == "delay");
  const JobStore::Delivered d{"w", 10, 1, "orders", Mode::keep, {}};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 15);
  CHECK(report("w", ReportStatus::finished, 16).state == JobState::finished);
}

// A mark whose answer was lost (Redis closed the connection after running it, as a restart
// does) is sent again, and by then the job may have moved on. It settles only the claim of its
// attempt still in flight: the job the consumer reported failed keeps its retry (the soak lost
// retries this way), a repeat keeps its next occurrence, a later claim is left to its own mark.
TEST_CASE_METHOD(Lifecycle, "a mark sent again after its answer was lost leaves a job that moved on as it is",
                 "[store][lifecycle][crash]") {
  SECTION("reported failed: its retry still comes") {
    store.accept(std::vector<NewJob>{job("f", 10)}, 0);
    auto c = store.claim(shard, Ids{"f"}, 10);
    const JobStore::Delivered d{"f", c[0].deliver_at, c[0].attempt, "orders", Mode::keep, {}};
    REQUIRE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 11)[0].changed);
    REQUIRE(report("f", ReportStatus::failed, 20, 500).state == JobState::delay);
    const auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 21)[0];
    CHECK_FALSE(t.changed);
    CHECK(t.state == JobState::delay);
    CHECK(t.at == 500);  // where it waits: the broker holds it there
    CHECK(field("f", "state") == "delay");
    CHECK(score("f") == 500);
    c = store.claim(shard, Ids{"f"}, 500);
    REQUIRE(c[0].kind == Claim::Kind::deliver);
    CHECK(c[0].attempt == 2);
    // The stale mark of attempt 1 again, with attempt 2 in flight: attempt 2 stays in flight.
    CHECK_FALSE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 501)[0].changed);
    CHECK(field("f", "state") == "delay");
    const JobStore::Delivered d2{"f", c[0].deliver_at, 2, "orders", Mode::keep, {}};
    CHECK(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d2, 1), 502)[0].state == JobState::ready);
    CHECK(misplaced() == Ids{});
  }
  SECTION("a plain job marked the fast way, then upserted: the new job is not marked by the old ack") {
    store.accept(std::vector<NewJob>{job("p", 10)}, 0);
    auto c = store.claim(shard, Ids{"p"}, 10);
    const JobStore::Delivered d{"p", c[0].deliver_at, c[0].attempt, "orders"};
    REQUIRE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 11)[0].changed);
    NewJob again = job("p", 900);
    again.version = 7;
    store.accept(std::vector<NewJob>{again}, 12);
    REQUIRE(field("p", "state") == "delay");
    const auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 13)[0];
    CHECK_FALSE(t.changed);
    CHECK(t.at == 900);
    CHECK(field("p", "state") == "delay");
    CHECK(pending() == std::vector<PendingEntry>{{"p", 900}});
  }
  SECTION("a repeat: its next occurrence is not skipped") {
    accept_every("r", 1000, 1000);
    auto c = store.claim(shard, Ids{"r"}, 1000);
    REQUIRE(c[0].repeat == 1);
    const JobStore::Delivered d{"r", 1000, c[0].attempt, "orders", Mode::drop, {}};
    REQUIRE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1001)[0].at == 2000);
    const auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1002)[0];
    CHECK_FALSE(t.changed);
    CHECK(t.at == 2000);  // the next occurrence, which the lost answer would have told
    CHECK(field("r", "repeat") == "2");
    CHECK(score("r") == 2000);
    CHECK(store.claim(shard, Ids{"r"}, 2000)[0].repeat == 2);
  }
}

TEST_CASE_METHOD(Lifecycle, "a cancel between two occurrences stops the series", "[store][lifecycle]") {
  accept_every("c", 1000, 100);
  deliver_again("c", 1000, Mode::drop);
  CHECK(field("c", "state") == "delay");
  CHECK(store.cancel(shard, "c", 1050).changed);
  CHECK_FALSE(score("c"));
  CHECK(report("c", ReportStatus::running, 1060).verdict == ReportOutcome::Verdict::ignored);
}

TEST_CASE_METHOD(Lifecycle, "locate reads a business name of the contract's full length whole", "[store][lifecycle]") {
  // At the grammar's limits (a 15-digit deliver_at, a 9-digit attempt, a 100-character business,
  // the contract's longest) the header's first four words take 132 bytes: more than locate()'s
  // first read, and the business must not come back cut short.
  const std::string business(100, 'b');
  store.accept(std::vector<NewJob>{job("short", 100)}, 0);  // the shard is known
  const std::string line = "100000000000000 123456789 " + business + "\npayload";
  redis.command({"SET", keys.job(shard, "long"), "delay " + line});              // as 0.3 kept it: a key
  delayd::testing::put_record(redis, keys, shard, "long-now", "delay " + line);  // as it is kept now
  delayd::testing::put_record(redis, keys, shard, "long-ready", "ready " + line);
  const auto where = store.locate(Ids{"long", "short", "long-now", "long-ready"});
  for (const size_t i : {0, 2, 3}) {
    REQUIRE(where[i]);
    CHECK(where[i]->shard == shard);
    CHECK(where[i]->business == business);
    CHECK(where[i]->attempt == 123456789);
  }
  REQUIRE(where[1]);
  CHECK(where[1]->business == "orders");
}

// Upserts (accept.lua, "latest wins"): the version is the record's ingest offset in the shard.
TEST_CASE_METHOD(Fixture, "an upsert replaces a waiting job, waits for one in flight, and reuses a delivered id",
                 "[store][upsert]") {
  auto upsert = [&](std::int64_t version, std::int64_t at, std::string business = "orders") {
    NewJob j = job("u", at, std::move(business));
    j.value = "v" + std::to_string(version);
    j.version = version;
    return store.accept(std::vector<NewJob>{j}, 100)[0];
  };
  CHECK(upsert(5, 1000).kind == AcceptKind::created);
  CHECK(record("u").rfind("delay 1000 0 orders vo=5\n", 0) == 0);
  // Read again after a crash (the same offset), or an older version: nothing changes.
  CHECK(upsert(5, 2000).kind == AcceptKind::existed);
  CHECK(upsert(3, 3000).kind == AcceptKind::existed);
  CHECK(field("u", "deliver_at") == "1000");
  CHECK(field("u", "value") == "v5");

  // A newer version replaces time, payload and business, earlier or later.
  const AcceptOutcome later = upsert(8, 500, "mail");
  CHECK(later.kind == AcceptKind::updated);
  CHECK(later.deliver_at == 500);
  CHECK(field("u", "deliver_at") == "500");
  CHECK(field("u", "value") == "v8");
  CHECK(field("u", "business") == "mail");
  CHECK(pending() == std::vector<PendingEntry>{{"u", 500}});
  auto s = store.stats();
  CHECK(s.by_business_state["orders"]["delay"] == 0);
  CHECK(s.by_business_state["mail"]["delay"] == 1);
  CHECK(redis.command({"LRANGE", keys.wake(shard), "0", "-1"}).view().size() == 1);  // the owner moves its timer

  // In flight: nothing yet, the caller asks again once the delivery settles.
  auto c = store.claim(shard, Ids{"u"}, 500);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK_FALSE(c[0].plain);  // an upserted job settles the slow way, which keeps its version
  CHECK(upsert(9, 900).kind == AcceptKind::in_flight);
  CHECK(field("u", "value") == "v8");
  const std::vector<JobStore::Delivered> done{
      {"u", c[0].deliver_at, c[0].attempt, c[0].business, JobStore::Mode::drop}};  // as FirePath settles it
  store.mark_ready(shard, std::span<const JobStore::Delivered>(done), 510);
  CHECK(field("u", "state") == "ready");
  CHECK(record("u").find(" vo=8") != std::string::npos);
  CHECK(upsert(8, 500, "mail").kind == AcceptKind::existed);  // the delivered version, read again: no twin

  // After delivery, the waiting upsert applies as a new job of the id.
  const AcceptOutcome again = upsert(9, 900);
  CHECK(again.kind == AcceptKind::again);
  CHECK(again.created());
  CHECK(field("u", "state") == "delay");
  CHECK(field("u", "attempt") == "0");
  CHECK(field("u", "value") == "v9");
  CHECK(pending() == std::vector<PendingEntry>{{"u", 900}});
  CHECK(ttl("u") == -1);  // waiting again: no retention
  CHECK(misplaced() == Ids{});
  s = store.stats();
  CHECK(s.by_business_state["mail"]["ready"] == 0);
  CHECK(s.by_business_state["orders"]["delay"] == 1);
  const auto history = redis.command({"LRANGE", keys.history(shard, "u"), "0", "-1"});
  std::string events;
  for (std::size_t i = 0; i < history.view().size(); ++i) events += std::string(history.view()[i].str()) + "\n";
  CHECK_THAT(events, Catch::Contains(" updated 0 from%201000%20to%20500"));
  CHECK_THAT(events, Catch::Contains(" scheduled-again 0 its%20earlier%20job%20was%20ready%20after%201%20attempts"));

  // A cancel read before any version of an id wins over an upsert, as over a schedule.
  store.cancel(shard, "gone", 100, 300);
  NewJob late = job("gone", 700);
  late.version = 12;
  CHECK(store.accept(std::vector<NewJob>{late}, 200)[0].kind == AcceptKind::cancelled_early);
}

TEST_CASE_METHOD(Fixture, "a cancel read again after a newer upsert leaves it alone, and an upsert after a cancel wins",
                 "[store][upsert]") {
  auto upsert = [&](const std::string& id, std::int64_t version, std::int64_t at) {
    NewJob j = job(id, at);
    j.version = version;
    return store.accept(std::vector<NewJob>{j}, 100)[0];
  };
  // Offsets 10 (schedule), 11 (its delete), 12 (created again) of one partition.
  CHECK(upsert("x", 10, 1000).kind == AcceptKind::created);
  CHECK(store.cancel_anywhere(shard, "x", 100, 300, 11).changed);
  CHECK(upsert("x", 12, 2000).kind == AcceptKind::again);
  // Read again after a crash: 10 and 11 change nothing, the job created again waits.
  CHECK(upsert("x", 10, 1000).kind == AcceptKind::existed);
  CHECK_FALSE(store.cancel_anywhere(shard, "x", 100, 300, 11).changed);
  CHECK(field("x", "state") == "delay");
  CHECK(field("x", "deliver_at") == "2000");
  // Deleted before it was ever created (offset 20), then created (21): the creation wins in
  // this partition; a remembered cancel from another partition (no order) still holds.
  CHECK(store.cancel_anywhere(shard, "y", 100, 300, 20).state == JobState::missing);
  CHECK(upsert("y", 21, 3000).kind == AcceptKind::again);
  CHECK(field("y", "state") == "delay");
  const std::string other = shard_id("delay-ingest", 1);
  CHECK(store.cancel(other, "z", 100, 300).state == JobState::missing);
  NewJob z = job("z", 3000);
  z.shard = other;
  z.version = 5;
  CHECK(store.accept(std::vector<NewJob>{z}, 100)[0].kind == AcceptKind::cancelled_early);
}

TEST_CASE_METHOD(Lifecycle, "a takeover's logged delivery keeps the attempt only for the occurrence in flight",
                 "[store][lifecycle][takeover]") {
  accept_every("t", 1000, 1000, 3);
  // Occurrence 1 claimed, delivered and marked: occurrence 2 is next, at 2 000.
  auto c = store.claim(shard, Ids{"t"}, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].repeat == 1);
  CHECK(c[0].attempt == 1);
  JobStore::Delivered d{"t", 1000, c[0].attempt, "orders", Mode::drop, {}};
  d.next_known = true;
  d.next = Occurrence{2000, 2};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1000);
  // Occurrence 2 claimed by an owner that dies before its transaction commits: in flight, and
  // attempt 1 again, as every occurrence is.
  c = store.claim(shard, Ids{"t"}, 2000);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].attempt == 1);
  // The new owner's delivery log holds occurrence 1's record: not the one in flight, so a new
  // attempt is counted and the occurrence goes out (before, the attempt alone matched, and the
  // occurrence was settled unsent).
  const std::vector<KnownDelivery> earlier{{1, 1}};
  c = store.claim(shard, Ids{"t"}, 2100, 0, {}, earlier);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].attempt == 2);
  // A log holding the occurrence in flight, with its attempt: kept, for the caller to settle.
  const std::vector<KnownDelivery> this_one{{2, 2}};
  c = store.claim(shard, Ids{"t"}, 2200, 0, {}, this_one);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].attempt == 2);
  // And a job that does not repeat names no occurrence: its attempt alone decides.
  store.accept(std::vector<NewJob>{job("p", 3000)}, 0);
  CHECK(store.claim(shard, Ids{"p"}, 3000)[0].attempt == 1);
  const std::vector<KnownDelivery> plain{{1, 0}};
  CHECK(store.claim(shard, Ids{"p"}, 3100, 0, {}, plain)[0].attempt == 1);
}
