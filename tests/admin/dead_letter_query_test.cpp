// The console's dead-letter queries without Kafka: the walk over partitions held in memory (merge
// order, every record once whatever the page size, filters, the scan budget), the cursor, the
// parameters refused, the ingest record a redrive makes of each kind of dead letter, and a
// redrive's dry run count.
#include "admin/dead_letter_query.hpp"

#include <catch2/catch.hpp>
#include <set>

using namespace delayd::admin;
using delayd::connectors::Header;
using delayd::connectors::Headers;
using delayd::connectors::Record;

namespace {

// Partitions of records in memory; offsets start at each partition's `first`.
class MemorySource final : public DeadLetterSource {
 public:
  std::vector<std::vector<Record>> parts;
  std::vector<std::int64_t> first;
  std::size_t reads = 0;

  std::int32_t partitions() override { return static_cast<std::int32_t>(parts.size()); }
  std::int64_t first_offset(std::int32_t p) override { return first[p]; }
  std::int64_t end_offset(std::int32_t p) override { return first[p] + static_cast<std::int64_t>(parts[p].size()); }
  std::int64_t offset_for_time(std::int32_t p, std::int64_t ms) override {
    for (const Record& r : parts[p]) {
      if (r.timestamp_ms >= ms) return r.offset;
    }
    return end_offset(p);
  }
  std::vector<Record> read(std::int32_t p, std::int64_t from, std::int64_t to, std::size_t max) override {
    ++reads;
    std::vector<Record> out;
    for (const Record& r : parts[p]) {
      if (r.offset >= from && r.offset < to && out.size() < max) out.push_back(r);
    }
    return out;
  }
  void add(std::int32_t p, std::int64_t at, Headers headers, std::string value = "v") {
    while (static_cast<std::int32_t>(parts.size()) <= p) {
      parts.emplace_back();
      first.push_back(0);
    }
    Record r;
    r.topic = "dlq";
    r.partition = p;
    r.offset = first[p] + static_cast<std::int64_t>(parts[p].size());
    r.timestamp_ms = at;
    r.value = std::move(value);
    r.headers = std::move(headers);
    parts[p].push_back(std::move(r));
  }
};

Headers fired(const std::string& job, const std::string& business, const std::string& reason,
              const std::string& error) {
  return {{"trace", "t-" + job},           {"delay-ms", "5000"}, {"business", business}, {"job-id", job},
          {"deliver-at", "1700000000000"}, {"attempt", "3"},     {"error", error},       {"reason", reason}};
}

// One dead letter as the walk reads it (partition 0, offset 9), keyed `key`, with `headers`.
Record letter(const std::string& key, Headers headers) {
  Record r;
  r.topic = "dlq";
  r.partition = 0;
  r.offset = 9;
  r.key = key;
  r.value = "v";
  r.headers = std::move(headers);
  return r;
}

Headers refused(const std::string& job, std::int32_t partition, std::int64_t offset) {
  return {{"job-id", job},
          {"deliver-at", "tomorrow"},
          {"business", "orders"},
          {"error", "header 'deliver-at' is not epoch milliseconds or RFC 3339"},
          {"reason", "invalid_record"},
          {"source-topic", "ingest"},
          {"source-partition", std::to_string(partition)},
          {"source-offset", std::to_string(offset)}};
}

std::vector<std::string> walk_all(MemorySource& src, const DeadLetterFilter& f, std::size_t limit) {
  std::vector<std::string> ids;
  std::optional<DeadLetterCursor> cursor;
  for (int pages = 0; pages < 1000; ++pages) {
    const DeadLetterPage page = walk_dead_letters(src, f, cursor, limit);
    for (const Record& r : page.records) ids.push_back(dead_letter_id(r.partition, r.offset));
    // The cursor goes through its text form, as a client's would.
    if (!page.next) break;
    cursor = decode_dead_letter_cursor(f, encode_dead_letter_cursor(f, *page.next));
    REQUIRE(cursor);
  }
  return ids;
}

std::optional<std::string> value_of(const Headers& h, const std::string& name) {
  for (const Header& x : h) {
    if (x.name == name) return x.value;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a dead-letter walk merges partitions by time and lists each record once, whatever the page size",
          "[admin][dlq]") {
  MemorySource src;
  // Three partitions, times interleaved; partition 1 starts past offset 0 (retention).
  for (int i = 0; i < 20; ++i) {
    const auto p = static_cast<std::int32_t>(i % 3);
    if (p == 1 && src.parts.size() < 2) {
      src.parts.resize(2);
      src.first = {0, 40};
    }
    src.add(p, 1000 + i * 10, fired("j" + std::to_string(i), i % 2 ? "mail" : "orders", "reported_failed", "boom"));
  }
  const std::vector<std::string> all = walk_all(src, {}, 500);
  REQUIRE(all.size() == 20);
  CHECK(std::set<std::string>(all.begin(), all.end()).size() == 20);
  // In time order: j0, j1, ... (each at 1000 + 10 i).
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) {
    const int p = i % 3;
    const int nth = i / 3;
    expected.push_back(std::to_string(p) + ":" + std::to_string((p == 1 ? 40 : 0) + nth));
  }
  CHECK(all == expected);
  for (std::size_t limit : {1, 2, 3, 7}) {
    INFO("limit " << limit);
    CHECK(walk_all(src, {}, limit) == all);
  }
  DeadLetterFilter mail;
  mail.business = "mail";
  CHECK(walk_all(src, mail, 3).size() == 10);
  DeadLetterFilter window;
  window.since = 1050;
  window.until = 1100;
  CHECK(walk_all(src, window, 2) == std::vector<std::string>(all.begin() + 5, all.begin() + 11));
}

TEST_CASE("a dead-letter filter matches the reason word or a piece of the error text, in any case", "[admin][dlq]") {
  MemorySource src;
  src.add(0, 1, fired("a", "orders", "ack_timeout", "no report within 30000 ms"));
  src.add(0, 2, refused("b", 1, 7));
  src.add(0, 3, {{"error", "an old record without a reason word: Deliver-At missing"}});
  DeadLetterFilter f;
  f.reason = "ACK_TIMEOUT";
  CHECK(walk_all(src, f, 10) == std::vector<std::string>{"0:0"});
  f.reason = "deliver-at";
  CHECK(walk_all(src, f, 10) == std::vector<std::string>{"0:1", "0:2"});
  f.reason = "nothing like it";
  CHECK(walk_all(src, f, 10).empty());
}

TEST_CASE("a dead-letter page stops at its scan budget and says so, and the cursor goes on from there",
          "[admin][dlq]") {
  MemorySource src;
  for (int i = 0; i < 50; ++i) src.add(0, i, fired("x" + std::to_string(i), "orders", "reported_failed", "boom"));
  src.add(0, 60, fired("needle", "rare", "reported_failed", "boom"));
  DeadLetterFilter rare;
  rare.business = "rare";
  const DeadLetterPage first = walk_dead_letters(src, rare, std::nullopt, 10, 20);
  CHECK(first.records.empty());
  CHECK(first.partial);
  CHECK(first.examined == 20);
  REQUIRE(first.next);
  CHECK(first.next->next == std::vector<std::int64_t>{20});
  DeadLetterPage page = first;
  std::vector<std::string> found;
  for (int i = 0; i < 10 && page.next; ++i) {
    page = walk_dead_letters(src, rare, page.next, 10, 20);
    for (const Record& r : page.records) found.push_back(*value_of(r.headers, "job-id"));
  }
  CHECK(found == std::vector<std::string>{"needle"});
  CHECK_FALSE(page.next);
}

TEST_CASE("a dead-letter cursor is tied to its filter and refused when damaged", "[admin][dlq]") {
  DeadLetterFilter f;
  f.business = "orders";
  const DeadLetterCursor c{{3, 0, 17}};
  const std::string text = encode_dead_letter_cursor(f, c);
  CHECK(decode_dead_letter_cursor(f, text) == c);
  DeadLetterFilter other;
  other.business = "mail";
  CHECK_FALSE(decode_dead_letter_cursor(other, text));
  for (const std::string& bad : {std::string(""), text + "-", text + "x", std::string("d1..1"), "1." + text}) {
    INFO(bad);
    CHECK_FALSE(decode_dead_letter_cursor(f, bad));
  }
}

TEST_CASE("GET /dead-letters's parameters are checked, each refusal naming its field", "[admin][dlq]") {
  using Params = std::map<std::string, std::string, std::less<>>;
  const std::pair<Params, std::string> bad[] = {
      {{{"limit", "0"}}, "limit"},
      {{{"limit", "501"}}, "limit"},
      {{{"since", "soon"}}, "since"},
      {{{"since", "2000"}, {"until", "1000"}}, "since"},
      {{{"business", "a b"}}, "business"},
      {{{"reason", ""}}, "reason"},
      {{{"reason", std::string(kMaxErrorFilterChars + 1, 'x')}}, "reason"},
      {{{"cursor", "nope"}}, "cursor"},
      {{{"state", "failed"}}, "state"},
  };
  for (const auto& [params, field] : bad) {
    const auto r = parse_dead_letter_request(params);
    REQUIRE(std::holds_alternative<BadRequest>(r));
    CHECK(std::get<BadRequest>(r).field == field);
  }
  const auto ok = parse_dead_letter_request({{"since", "2026-11-24T00:00:00Z"}, {"limit", "5"}, {"reason", "x"}});
  REQUIRE(std::holds_alternative<DeadLetterListRequest>(ok));
  CHECK(std::get<DeadLetterListRequest>(ok).filter.since == 1795478400000);
  CHECK(std::get<DeadLetterListRequest>(ok).limit == 5);
}

TEST_CASE("a redrive publishes the original record again, less what delayd added, with its redrive headers",
          "[admin][dlq]") {
  SECTION("an ingest record's dead letter goes back to the partition it came from") {
    Record rec;
    rec.partition = 2;
    rec.offset = 9;
    rec.key = "k";
    rec.value = "v";
    rec.headers = refused("b", 3, 77);
    const auto r = redrive_record(rec, 3, "ingest", "op1");
    REQUIRE(std::holds_alternative<Redriven>(r));
    const auto& out = std::get<Redriven>(r).record;
    CHECK(out.topic == "ingest");
    CHECK(out.partition == 3);
    CHECK(out.key == "k");
    CHECK(out.value == "v");
    CHECK(out.headers == Headers{{"job-id", "b"},
                                 {"deliver-at", "tomorrow"},
                                 {"business", "orders"},
                                 {"redrive-count", "1"},
                                 {"redriven-from", "2:9"},
                                 {"redrive-operation", "op1"}});
  }
  SECTION("a delivered job's dead letter loses what delivery added, and keeps its own headers") {
    Record rec;
    rec.partition = 0;
    rec.offset = 4;
    rec.value = "v";
    rec.headers = fired("a", "orders", "reported_failed", "boom");
    rec.headers.push_back({"redrive-count", "1"});
    rec.headers.push_back({"redriven-from", "0:1"});
    const auto r = redrive_record(rec, 3, "ingest", "op2");
    REQUIRE(std::holds_alternative<Redriven>(r));
    const auto& out = std::get<Redriven>(r).record;
    CHECK(out.partition == -1);  // the caller finds the job's shard
    CHECK(out.headers == Headers{{"trace", "t-a"},
                                 {"business", "orders"},
                                 {"job-id", "a"},
                                 {"deliver-at", "1700000000000"},
                                 {"redrive-count", "2"},
                                 {"redriven-from", "0:4"},
                                 {"redrive-operation", "op2"}});
  }
  SECTION("a derived job-id is not given back (the ingest contract refuses it in a header)") {
    Record rec;
    rec.value = "v";
    rec.headers = fired("auto:ingest:0:5", "orders", "reported_failed", "boom");
    const auto out = std::get<Redriven>(redrive_record(rec, 3, "ingest", "op")).record;
    CHECK_FALSE(value_of(out.headers, "job-id"));
  }
  SECTION("skipped: redriven max_redrives times already, or its value dropped") {
    Record rec;
    rec.value = "v";
    rec.headers = fired("a", "orders", "reported_failed", "boom");
    rec.headers.push_back({"redrive-count", "3"});
    const auto over = redrive_record(rec, 3, "ingest", "op");
    REQUIRE(std::holds_alternative<std::string>(over));
    CHECK(std::get<std::string>(over) == "redriven 3 times already (admin.max_redrives 3)");
    Record stripped;
    stripped.headers = {{"error", "too large"}, {"value-bytes", "2000000"}};
    CHECK(std::holds_alternative<std::string>(redrive_record(stripped, 3, "ingest", "op")));
    CHECK_FALSE(summarize(stripped).value_kept);
  }
}

TEST_CASE("a redrive's dry run counts the dead letters of its filter and those it would skip, by reason",
          "[admin][dlq]") {
  MemorySource src;
  for (int i = 0; i < 700; ++i) {  // more than a page
    Headers h = fired("j" + std::to_string(i), "orders", "reported_failed", "boom");
    if (i % 100 == 0) h.push_back({"redrive-count", "2"});
    src.add(i % 2, 1000 + i, std::move(h));
  }
  src.add(0, 5000, refused("r", 0, 1));
  src.add(1, 5001, {{"error", "too large"}, {"reason", "reported_failed"}, {"value-bytes", "2000000"}}, "");
  DeadLetterFilter failed;
  failed.reason = "reported_failed";
  const RedriveCount n = count_redrivable(src, failed, 2, "ingest", std::chrono::seconds(10));
  CHECK(n.complete);
  CHECK(n.matched == 701);
  CHECK(n.would_skip == std::map<std::string, std::int64_t>{{"redriven 2 times already (admin.max_redrives 2)", 7},
                                                            {"its value was dropped to fit the dead-letter topic", 1}});
  CHECK(to_json(n)["would_skip"].size() == 2);
  DeadLetterFilter orders;  // the one with its value dropped names no business
  orders.business = "orders";
  const nlohmann::json all = to_json(count_redrivable(src, orders, 3, "ingest", std::chrono::seconds(10)));
  CHECK(all["matched"] == 701);
  CHECK(all["would_skip"] == nlohmann::json::object());
  CHECK_FALSE(count_redrivable(src, {}, 3, "ingest", std::chrono::seconds(0)).complete);
}

TEST_CASE("a dead letter read from an etf1 or Chronos topic is not redriven to delayd's ingest topic", "[unit][dlq]") {
  RedriveTarget target("ingest");
  target.other_formats["schedules"] = "etf1";
  Record rec = letter("sched-1", {{"error", "header 'scheduler-epoch' must be whole seconds"},
                                  {"reason", "invalid_record"},
                                  {"source-topic", "schedules"},
                                  {"source-partition", "2"},
                                  {"source-offset", "5"}});
  const auto r = redrive_record(rec, 3, target, "op");
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK(std::get<std::string>(r) == "read from schedules in the etf1 format: publish it there again");
  rec.headers[2].value = "ingest";
  CHECK(std::holds_alternative<Redriven>(redrive_record(rec, 3, target, "op")));
}

TEST_CASE("a delivery letter of an etf1 or Chronos job is not redriven to delayd's ingest topic", "[unit][dlq]") {
  // What the fire path dead-letters when a peer-format job's delivery fails for good: the ready
  // record, whose business names its target topic, which no business of delayd's format can.
  Record rec = letter("target-key", fired("sched-7", "topic:billing.events", "delivery_failed", "Broker: too large"));
  const auto r = redrive_record(rec, 3, "ingest", "op");
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK(std::get<std::string>(r) ==
        "its job was read in a peer format (business topic:billing.events), which delayd's ingest topic cannot "
        "schedule: publish it to the peer's topic again");
  // A delayd-format job's delivery letter is redriven as before.
  rec.headers = fired("sched-7", "billing", "delivery_failed", "Broker: too large");
  CHECK(std::holds_alternative<Redriven>(redrive_record(rec, 3, "ingest", "op")));
}
