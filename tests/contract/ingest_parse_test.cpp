// The ingest contract, rule by rule: what a producer may write on the ingest topic and what
// delayd makes of it.
#include "contract/ingest_parse.hpp"

#include <catch2/catch.hpp>
#include <limits>
#include <random>

#include "config/config.hpp"
#include "contract/time_format.hpp"

using namespace delayd::contract;
using namespace delayd::config;
using delayd::connectors::Header;
using delayd::connectors::Headers;
using delayd::connectors::Record;

namespace {

constexpr std::int64_t kNoon = 1795341600123;  // 2026-11-22T10:00:00.123Z

IngestRules rules() {
  IngestRules r;
  r.ready_topic_template = "ready.{business}";
  r.max_value_bytes = 1000;
  r.ingest_topics = {"delay-ingest"};
  r.dlq_topic = "delay-ingest.dlq";
  return r;
}

Record record(Headers headers) {
  Record rec;
  rec.topic = "delay-ingest";
  rec.partition = 3;
  rec.offset = 42;
  rec.timestamp_ms = 1'700'000'000'000;
  rec.key = "k";
  rec.value = "payload";
  rec.headers = std::move(headers);
  return rec;
}

// A schedulable record with one header set to `value`, or removed when `value` is nullopt.
// Pass std::optional<std::string>{} to set a header with a null value.
Record valid_with(const std::string& name, std::optional<std::optional<std::string>> value) {
  Headers h = {{"deliver-at", "1795341600123"}, {"business", "orders"}, {"job-id", "j-1"}};
  std::erase_if(h, [&](const Header& x) { return x.name == name; });
  if (value) h.push_back({name, *value});
  return record(std::move(h));
}

ScheduleJob schedule_of(const Record& rec, const IngestRules& r = rules()) {
  const ParsedIngest p = parse_ingest(rec, r);
  if (const auto* bad = std::get_if<Invalid>(&p)) FAIL("unexpectedly invalid: " << bad->reason);
  REQUIRE(std::holds_alternative<ScheduleJob>(p));
  return std::get<ScheduleJob>(p);
}

std::string reason_of(const Record& rec, const IngestRules& r = rules()) {
  const ParsedIngest p = parse_ingest(rec, r);
  REQUIRE(std::holds_alternative<Invalid>(p));
  const std::string reason = std::get<Invalid>(p).reason;
  // Every reason is one printable line: it becomes a Kafka header and a log line.
  for (char c : reason) REQUIRE((c >= 0x20 && c <= 0x7e));
  return reason;
}

}  // namespace

TEST_CASE("a complete schedule record", "[unit][ingest]") {
  const Record rec = record({{"deliver-at", "2026-11-22T10:00:00.123Z"},
                             {"business", "orders"},
                             {"job-id", "order-1001-timeout"},
                             {"trace-id", "abc"}});
  const ScheduleJob job = schedule_of(rec);
  CHECK(job.job_id == "order-1001-timeout");
  CHECK_FALSE(job.job_id_derived);
  CHECK(job.deliver_at_ms == kNoon);
  CHECK(job.business == "orders");
  CHECK(job.ready_topic == "ready.orders");
  CHECK(job.key == "k");
  CHECK(job.value == "payload");
  CHECK(job.carried == Headers{{"trace-id", "abc"}});  // business is kept in the job record
}

TEST_CASE("deliver-at: epoch milliseconds and RFC 3339 name the same instant", "[unit][ingest]") {
  for (const char* text : {"1795341600123", "2026-11-22T10:00:00.123Z", "2026-11-22t10:00:00.123z",
                           "2026-11-22T11:00:00.123+01:00", "2026-11-22T02:00:00.123000-08:00"}) {
    INFO(text);
    CHECK(schedule_of(valid_with("deliver-at", text)).deliver_at_ms == kNoon);
  }
  // A part of a millisecond is a later instant: due at the next millisecond, never early.
  CHECK(schedule_of(valid_with("deliver-at", "2026-11-22T02:00:00.123456-08:00")).deliver_at_ms == kNoon + 1);
  CHECK(schedule_of(valid_with("deliver-at", "0")).deliver_at_ms == 0);
  CHECK(schedule_of(valid_with("deliver-at", "2028-02-29T00:00:00Z")).deliver_at_ms == 1835395200000);
}

TEST_CASE("deliver-at: anything else is invalid", "[unit][ingest]") {
  CHECK(reason_of(valid_with("deliver-at", "tomorrow")) ==
        "header 'deliver-at' is not epoch milliseconds or RFC 3339: \"tomorrow\"");
  CHECK(reason_of(valid_with("deliver-at", "")) == "header 'deliver-at' is not epoch milliseconds or RFC 3339: \"\"");
  CHECK(reason_of(valid_with("deliver-at", std::optional<std::string>{})) == "header 'deliver-at' is null");
  CHECK(reason_of(valid_with("deliver-at", "-5")) ==
        "header 'deliver-at' is not epoch milliseconds or RFC 3339: \"-5\"");
  CHECK(reason_of(valid_with("deliver-at", "2026-02-30T00:00:00Z")) ==
        "header 'deliver-at' is not a valid date and time: \"2026-02-30T00:00:00Z\"");
  CHECK_THAT(reason_of(valid_with("deliver-at", "2027-02-29T00:00:00Z")), Catch::Contains("not a valid date"));
  CHECK_THAT(reason_of(valid_with("deliver-at", "253402300800000")),
             Catch::Contains("outside 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999Z"));
  CHECK_THAT(reason_of(valid_with("deliver-at", "1969-12-31T23:59:59Z")), Catch::Contains("outside"));
  CHECK(reason_of(valid_with("deliver-at", "1795341600123 ")) ==
        "header 'deliver-at' is not epoch milliseconds or RFC 3339: \"1795341600123 \"");
  CHECK(reason_of(valid_with("deliver-at", std::string("17\x00\xff", 4))) ==
        "header 'deliver-at' is not epoch milliseconds or RFC 3339: \"17\\x00\\xff\"");
  const std::string reason = reason_of(valid_with("deliver-at", std::string(5000, 'x')));
  CHECK(reason.size() < 200);
  CHECK_THAT(reason, Catch::EndsWith("...\""));
}

TEST_CASE("deliver-at is required unless delay-ms is given", "[unit][ingest]") {
  CHECK(reason_of(valid_with("deliver-at", std::nullopt)) == "missing header 'deliver-at' (or 'delay-ms')");
}

TEST_CASE("delay-ms counts from the record's timestamp", "[unit][ingest]") {
  Record rec = record({{"delay-ms", "30000"}, {"business", "orders"}});
  rec.timestamp_ms = kNoon;
  CHECK(schedule_of(rec).deliver_at_ms == kNoon + 30000);

  rec.headers[0].value = "0";
  CHECK(schedule_of(rec).deliver_at_ms == kNoon);

  rec.headers[0].value = "007";
  CHECK(schedule_of(rec).deliver_at_ms == kNoon + 7);

  // delay-ms is carried; the broker adds a normalized deliver-at on the ready record.
  CHECK(schedule_of(rec).carried == Headers{{"delay-ms", "007"}});

  for (const char* bad : {"-1", "+1", "1.5", "", " 1", "1s", "0x10"}) {
    INFO(bad);
    rec.headers[0].value = bad;
    CHECK_THAT(reason_of(rec), Catch::StartsWith("header 'delay-ms' is not a non-negative decimal number"));
  }
  rec.headers[0].value = std::nullopt;
  CHECK(reason_of(rec) == "header 'delay-ms' is null");
  rec.headers[0].value = "99999999999999999999";
  CHECK_THAT(reason_of(rec), Catch::StartsWith("header 'delay-ms' is too large"));
  rec.headers[0].value = std::to_string(kMaxEpochMs);
  CHECK_THAT(reason_of(rec), Catch::Contains("is after 9999-12-31"));
  rec.headers[0].value = std::to_string(kMaxEpochMs - kNoon);
  CHECK(schedule_of(rec).deliver_at_ms == kMaxEpochMs);

  rec.headers[0].value = "1000";
  rec.timestamp_ms = -1;
  CHECK(reason_of(rec) == "header 'delay-ms' given but the record has no timestamp");
  rec.timestamp_ms = 0;
  CHECK(schedule_of(rec).deliver_at_ms == 1000);
}

TEST_CASE("deliver-at and delay-ms together are invalid", "[unit][ingest]") {
  CHECK(reason_of(valid_with("delay-ms", "5")) == "both deliver-at and delay-ms given");
  CHECK(reason_of(record({{"deliver-at", std::nullopt}, {"delay-ms", "5"}, {"business", "b"}})) ==
        "both deliver-at and delay-ms given");
}

TEST_CASE("business: 1-100 characters of [A-Za-z0-9._-]", "[unit][ingest]") {
  CHECK(schedule_of(valid_with("business", std::string(100, 'b'))).ready_topic == "ready." + std::string(100, 'b'));
  CHECK(schedule_of(valid_with("business", "Pay_v2.eu-1")).ready_topic == "ready.Pay_v2.eu-1");
  CHECK(reason_of(valid_with("business", std::string(101, 'b'))) ==
        "header 'business' must be 1-100 characters of [A-Za-z0-9._-]: \"" + std::string(80, 'b') +
            "...\" (101 bytes)");
  CHECK(reason_of(valid_with("business", std::nullopt)) == "missing header 'business'");
  CHECK(reason_of(valid_with("business", std::optional<std::string>{})) == "header 'business' is null");
  for (const char* bad : {"", "a b", "a/b", "a:b", "caf\xc3\xa9", "{business}"}) {
    INFO(bad);
    CHECK_THAT(reason_of(valid_with("business", bad)), Catch::StartsWith("header 'business' must be 1-100 characters"));
  }
}

TEST_CASE("the ready topic comes from the template", "[unit][ingest]") {
  IngestRules r = rules();
  r.ready_topic_template = "{business}-due";
  CHECK(schedule_of(valid_with("business", "orders"), r).ready_topic == "orders-due");

  // A bare template must not produce an illegal, internal or delayd's own topic.
  r.ready_topic_template = "{business}";
  CHECK_THAT(reason_of(valid_with("business", "."), r), Catch::Contains("not a legal Kafka topic"));
  CHECK_THAT(reason_of(valid_with("business", ".."), r), Catch::Contains("not a legal Kafka topic"));
  CHECK_THAT(reason_of(valid_with("business", "__consumer_offsets"), r), Catch::Contains("not a legal Kafka topic"));
  CHECK_THAT(reason_of(valid_with("business", "delay-ingest"), r), Catch::Contains("delayd's own ingest or DLQ topic"));
  CHECK_THAT(reason_of(valid_with("business", "delay-ingest.dlq"), r),
             Catch::Contains("delayd's own ingest or DLQ topic"));
  r.ingest_topics.clear();
  r.dlq_topic.clear();
  CHECK(schedule_of(valid_with("business", "delay-ingest"), r).ready_topic == "delay-ingest");
}

TEST_CASE("ingest_rules follows the configuration", "[unit][ingest]") {
  ConfigFlags flags;
  flags.sets = {"kafka.ready_topic_template=due-{business}", "scheduler.max_value_bytes=10", "kafka.ingest_topic=in",
                "kafka.dlq_topic=in.dlq"};
  const Config c = load_config(flags, {});
  const IngestRules r = ingest_rules(c);
  CHECK(r.ready_topic_template == "due-{business}");
  CHECK(r.max_value_bytes == 10);
  CHECK(r.ingest_topics == std::set<std::string, std::less<>>{"in"});
  CHECK(r.dlq_topic == "in.dlq");
}

TEST_CASE("job-id: 1-200 printable ASCII characters", "[unit][ingest]") {
  CHECK(schedule_of(valid_with("job-id", std::string(200, 'j'))).job_id == std::string(200, 'j'));
  CHECK(schedule_of(valid_with("job-id", "!~{}\"'\\")).job_id == "!~{}\"'\\");
  CHECK_THAT(
      reason_of(valid_with("job-id", std::string(201, 'j'))),
      Catch::StartsWith("header 'job-id' must be 1-200 printable ASCII characters") && Catch::EndsWith("(201 bytes)"));
  CHECK(reason_of(valid_with("job-id", std::optional<std::string>{})) == "header 'job-id' is null");
  for (const std::string& bad : {std::string(""), std::string("a b"), std::string("a\tb"), std::string("caf\xc3\xa9"),
                                 std::string("a\x7f"), std::string("a\0b", 3)}) {
    INFO(bad);
    CHECK_THAT(reason_of(valid_with("job-id", bad)), Catch::StartsWith("header 'job-id' must be"));
  }
}

TEST_CASE("without job-id the id is derived from the record's position and timestamp", "[unit][ingest]") {
  Record rec = valid_with("job-id", std::nullopt);
  const ScheduleJob job = schedule_of(rec);
  CHECK(job.job_id == "auto:delay-ingest-3-42@" + std::to_string(rec.timestamp_ms));
  CHECK(job.job_id_derived);
  // Redelivery of the same record yields the same id, so a replay does not duplicate the job.
  CHECK(schedule_of(valid_with("job-id", std::nullopt)).job_id == job.job_id);
  Record other = valid_with("job-id", std::nullopt);
  other.offset = 43;
  CHECK(schedule_of(other).job_id == "auto:delay-ingest-3-43@" + std::to_string(rec.timestamp_ms));
  // A record without a timestamp still gets an id.
  other.timestamp_ms = -1;
  CHECK(schedule_of(other).job_id == "auto:delay-ingest-3-43");
}

// Item 10 of the fault-tolerance issue: before the prefix, a producer's explicit id could equal a
// derived one, and a re-created ingest topic (offsets from 0 again) made every record without a
// job-id a silent "duplicate" of a retained job.
TEST_CASE("derived ids cannot collide with explicit ids or with a re-created topic's records", "[unit][ingest]") {
  Record rec = valid_with("job-id", std::nullopt);
  const std::string derived = schedule_of(rec).job_id;
  CHECK_THAT(reason_of(valid_with("job-id", derived)),
             Catch::StartsWith("header 'job-id' must not start with 'auto:'"));
  CHECK(schedule_of(valid_with("job-id", "delay-ingest-3-42")).job_id ==
        "delay-ingest-3-42");  // the old form is a plain id
  Record recreated = rec;      // the same partition and offset, written after the topic was re-created
  recreated.timestamp_ms += 86'400'000;
  CHECK(schedule_of(recreated).job_id != derived);
}

TEST_CASE("an allow-list of businesses refuses every other business", "[unit][ingest]") {
  IngestRules rules;
  rules.allowed_businesses = {"orders", "mail"};
  CHECK(std::holds_alternative<ScheduleJob>(parse_ingest(valid_with("business", "orders"), rules)));
  const auto parsed = parse_ingest(valid_with("business", "invented-by-a-producer"), rules);
  REQUIRE(std::holds_alternative<Invalid>(parsed));
  CHECK(std::get<Invalid>(parsed).reason == "business \"invented-by-a-producer\" is not in kafka.allowed_businesses");
}

TEST_CASE("a record too large to become a ready record is refused at ingest", "[unit][ingest]") {
  IngestRules rules;
  rules.max_record_bytes = 1000;
  Record rec = valid_with("job-id", "big");
  rec.value = std::string(900, 'v');
  CHECK(std::holds_alternative<ScheduleJob>(parse_ingest(rec, rules)));
  rec.key = std::string(200, 'k');
  const auto parsed = parse_ingest(rec, rules);
  REQUIRE(std::holds_alternative<Invalid>(parsed));
  CHECK_THAT(std::get<Invalid>(parsed).reason, Catch::StartsWith("record is 11"));
}

TEST_CASE("op: schedule (default), upsert, cancel, reschedule, nothing else", "[unit][ingest]") {
  const ParsedIngest schedule = parse_ingest(valid_with("op", "schedule"), rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(schedule));
  CHECK_FALSE(std::get<ScheduleJob>(schedule).upsert);
  const ParsedIngest latest = parse_ingest(valid_with("op", "upsert"), rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(latest));
  CHECK(std::get<ScheduleJob>(latest).upsert);
  CHECK(std::get<ScheduleJob>(latest).job_id == "j-1");
  Record no_id = valid_with("job-id", std::nullopt);
  no_id.headers.push_back({"op", "upsert"});
  CHECK(reason_of(no_id) == "op 'upsert' needs header 'job-id'");
  CHECK(reason_of(valid_with("op", "Cancel")) ==
        "header 'op' must be 'schedule', 'upsert', 'cancel' or 'reschedule': \"Cancel\"");
  CHECK(reason_of(valid_with("op", "")) == "header 'op' must be 'schedule', 'upsert', 'cancel' or 'reschedule': \"\"");
  CHECK(reason_of(valid_with("op", std::optional<std::string>{})) == "header 'op' is null");
}

TEST_CASE("cancel needs job-id and ignores everything else", "[unit][ingest]") {
  Record rec = record({{"op", "cancel"},
                       {"job-id", "order-1001-timeout"},
                       {"deliver-at", "not a time"},
                       {"delay-ms", "also bad"},
                       {"business", "no spaces allowed"}});
  rec.value = std::string(5000, 'v');  // over the value limit, but a cancel has no value to keep
  rec.timestamp_ms = -1;
  const ParsedIngest p = parse_ingest(rec, rules());
  REQUIRE(std::holds_alternative<CancelJob>(p));
  CHECK(std::get<CancelJob>(p).job_id == "order-1001-timeout");

  CHECK(reason_of(record({{"op", "cancel"}, {"business", "orders"}})) == "op 'cancel' needs header 'job-id'");
  CHECK_THAT(reason_of(record({{"op", "cancel"}, {"job-id", "has space"}})),
             Catch::StartsWith("header 'job-id' must be"));
}

TEST_CASE("the value size limit", "[unit][ingest]") {
  Record rec = valid_with("trace", "t");
  rec.value = std::string(1000, 'v');
  CHECK(schedule_of(rec).value == std::string(1000, 'v'));
  rec.value = std::string(1001, 'v');
  CHECK(reason_of(rec) == "value is 1001 bytes, larger than the limit of 1000 bytes");
  rec.value = std::nullopt;  // a tombstone-like null value is scheduled and stays null
  CHECK_FALSE(schedule_of(rec).value.has_value());
  rec.key = std::nullopt;
  CHECK_FALSE(schedule_of(rec).key.has_value());
}

TEST_CASE("redrive-count: a redriven dead letter's count, carried on to its ready record", "[unit][ingest]") {
  CHECK(schedule_of(valid_with("trace", "t")).redrive_count == 0);
  const ScheduleJob job = schedule_of(valid_with("redrive-count", "2"));
  CHECK(job.redrive_count == 2);
  CHECK(std::count_if(job.carried.begin(), job.carried.end(),
                      [](const auto& h) { return h.name == "redrive-count"; }) == 1);
  CHECK(reason_of(valid_with("redrive-count", "-1")) ==
        "header 'redrive-count' must be a decimal number from 0 to 1000001: \"-1\"");
  CHECK_THAT(reason_of(valid_with("redrive-count", std::optional<std::string>{})), Catch::Contains("redrive-count"));
}

TEST_CASE("carried headers keep their order, minus deliver-at, job-id, attempt and business", "[unit][ingest]") {
  const Record rec = record({{"z-first", "1"},
                             {"attempt", "3"},
                             {"deliver-at", "1795341600123"},
                             {"nullable", std::nullopt},
                             {"business", "orders"},
                             {"job-id", "j"},
                             {"a-dup", "x"},
                             {"deliver-at", "second copy"},
                             {"a-dup", "y"},
                             {"job-id", "second id"},
                             {"Deliver-At", "case differs"},
                             {"", "empty name"},
                             {"op", "schedule"}});
  const ScheduleJob job = schedule_of(rec);
  CHECK(job.job_id == "j");
  CHECK(job.deliver_at_ms == kNoon);
  CHECK(job.carried == Headers{{"z-first", "1"},
                               {"nullable", std::nullopt},
                               {"a-dup", "x"},
                               {"a-dup", "y"},
                               {"Deliver-At", "case differs"},
                               {"", "empty name"},
                               {"op", "schedule"}});
}

TEST_CASE("the first of repeated headers counts", "[unit][ingest]") {
  const Record rec = record({{"business", "first"},
                             {"deliver-at", "1000"},
                             {"business", "bad value!"},
                             {"deliver-at", "garbage"},
                             {"op", "schedule"},
                             {"op", "cancel"}});
  const ScheduleJob job = schedule_of(rec);
  CHECK(job.business == "first");
  CHECK(job.deliver_at_ms == 1000);
}

TEST_CASE("header names are matched case-sensitively", "[unit][ingest]") {
  CHECK(reason_of(record({{"Deliver-At", "1000"}, {"business", "b"}})) ==
        "missing header 'deliver-at' (or 'delay-ms')");
  CHECK(reason_of(record({{"deliver-at", "1000"}, {"Business", "b"}})) == "missing header 'business'");
}

TEST_CASE("random bytes never throw and always give Invalid or a well-formed job", "[unit][ingest]") {
  std::mt19937_64 rng(20261122);
  // Plausible values per header name, so that the records reach every branch; the mutations
  // and raw bytes then probe the edges of each.
  const std::vector<std::pair<std::string, std::vector<std::string>>> plausible = {
      {"op", {"schedule", "cancel"}},
      {"job-id", {"order-1", "x", std::string(200, 'j')}},
      {"deliver-at",
       {"1795341600123", "2026-11-22T10:00:00.123+01:00", "0", "9999-12-31T23:59:59.999Z", "2024-02-29T23:59:60Z"}},
      {"delay-ms", {"5000", "0", "253402300799999"}},
      {"business", {"orders", "a", std::string(100, 'b')}},
      {"attempt", {"1"}},
      {"x", {""}},
  };
  const auto random_bytes = [&](std::size_t max_len) {
    std::string s(rng() % (max_len + 1), '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };
  const auto mutate = [&](std::string s) {
    if (s.empty() || rng() % 4 == 0) return random_bytes(40);
    for (int i = static_cast<int>(rng() % 3); i >= 0; --i) {
      s[rng() % s.size()] = static_cast<char>(rng() % 4 == 0 ? rng() : '0' + rng() % 10);
    }
    return s;
  };
  const std::int64_t timestamps[] = {
      -1, 0, kNoon, kMaxEpochMs, std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()};
  int schedules = 0, cancels = 0, invalids = 0;
  for (int i = 0; i < 20000; ++i) {
    Record rec;
    rec.topic = "delay-ingest";
    rec.partition = static_cast<std::int32_t>(rng() % 8);
    rec.offset = static_cast<std::int64_t>(rng() >> 1);
    rec.timestamp_ms = timestamps[rng() % 6];
    if (rng() % 2) rec.value = random_bytes(1200);
    const int n = static_cast<int>(rng() % 7);
    for (int h = 0; h < n; ++h) {
      const auto& [name, values] = plausible[rng() % plausible.size()];
      Header header;
      header.name = rng() % 10 ? name : random_bytes(12);
      if (rng() % 12) {
        const std::string& v = values[rng() % values.size()];
        header.value = rng() % 3 ? v : mutate(v);
      }
      rec.headers.push_back(std::move(header));
    }
    ParsedIngest p;
    REQUIRE_NOTHROW(p = parse_ingest(rec, rules()));
    if (const auto* job = std::get_if<ScheduleJob>(&p)) {
      ++schedules;
      bool carried_ok = true;
      for (const auto& h : job->carried) {
        carried_ok =
            carried_ok && h.name != "deliver-at" && h.name != "job-id" && h.name != "attempt" && h.name != "business";
      }
      const bool ok = job->deliver_at_ms >= 0 && job->deliver_at_ms <= kMaxEpochMs && !job->job_id.empty() &&
                      job->ready_topic == "ready." + job->business && carried_ok;
      if (!ok) FAIL("malformed job " << job->job_id);
    } else if (const auto* cancel = std::get_if<CancelJob>(&p)) {
      ++cancels;
      if (cancel->job_id.empty()) FAIL("cancel without id");
    } else {
      ++invalids;
      const std::string& reason = std::get<Invalid>(p).reason;
      bool printable = !reason.empty() && reason.size() < 1000;
      for (char c : reason) printable = printable && c >= 0x20 && c <= 0x7e;
      if (!printable) FAIL("bad reason " << reason);
    }
  }
  // The generator must reach every outcome, or the test proves little.
  CHECK(schedules > 500);
  CHECK(cancels > 500);
  CHECK(invalids > 500);
}

TEST_CASE("reschedule needs job-id and one new time", "[unit][ingest][lifecycle]") {
  Record rec = record({{"op", "reschedule"}, {"job-id", "j1"}, {"deliver-at", "1700000000000"}});
  ParsedIngest p = parse_ingest(rec, rules());
  REQUIRE(std::holds_alternative<RescheduleJob>(p));
  CHECK(std::get<RescheduleJob>(p) == RescheduleJob{"j1", 1700000000000});
  rec = record({{"op", "reschedule"}, {"job-id", "j1"}, {"delay-ms", "250"}});
  rec.timestamp_ms = 1000;
  p = parse_ingest(rec, rules());
  REQUIRE(std::holds_alternative<RescheduleJob>(p));
  CHECK(std::get<RescheduleJob>(p).deliver_at_ms == 1250);
  CHECK(reason_of(record({{"op", "reschedule"}, {"deliver-at", "5"}})) == "op 'reschedule' needs header 'job-id'");
  CHECK(reason_of(record({{"op", "reschedule"}, {"job-id", "j1"}})) == "missing header 'deliver-at' (or 'delay-ms')");
}

TEST_CASE("repeat-every-ms and repeat-count make a repeating job", "[unit][ingest][lifecycle]") {
  ParsedIngest p = parse_ingest(valid_with("repeat-every-ms", "500"), rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(p));
  CHECK(std::get<ScheduleJob>(p).repeat.every == std::chrono::milliseconds(500));
  CHECK(std::get<ScheduleJob>(p).repeat.count == 0);
  Record rec = valid_with("repeat-every-ms", "1000");
  rec.headers.push_back({"repeat-count", "3"});
  rec.headers.push_back({"repeat", "7"});  // delayd writes its own
  p = parse_ingest(rec, rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(p));
  CHECK(std::get<ScheduleJob>(p).repeat.count == 3);
  CHECK(delayd::connectors::find_header(std::get<ScheduleJob>(p).carried, "repeat") == nullptr);
  CHECK(reason_of(valid_with("repeat-count", "3")) == "header 'repeat-count' given without 'repeat-every-ms'");
  CHECK_THAT(reason_of(valid_with("repeat-every-ms", "0")), Catch::StartsWith("header 'repeat-every-ms' must be"));
  CHECK_THAT(reason_of(valid_with("repeat-every-ms", "-5")), Catch::StartsWith("header 'repeat-every-ms' must be"));
}

TEST_CASE("a status record names a job and one of three statuses", "[unit][ingest][lifecycle]") {
  auto status = [](Headers h) { return parse_status(record(std::move(h))); };
  ParsedStatus p =
      status({{"job-id", "j1"}, {"status", "failed"}, {"error", std::string(1500, 'e')}, {"retry-after-ms", "2000"}});
  REQUIRE(std::holds_alternative<StatusReport>(p));
  const auto& r = std::get<StatusReport>(p);
  CHECK(r.job_id == "j1");
  CHECK(r.status == ReportStatus::failed);
  CHECK(r.error.size() == 1000);
  CHECK(r.retry_after_ms == std::optional<std::int64_t>(2000));
  CHECK(std::get<StatusReport>(status({{"job-id", "j1"}, {"status", "running"}})).status == ReportStatus::running);
  CHECK(std::get<StatusReport>(status({{"job-id", "j1"}, {"status", "running"}, {"attempt", "3"}})).attempt == 3);
  auto why = [&](Headers h) {
    const ParsedStatus q = status(std::move(h));
    return std::holds_alternative<Invalid>(q) ? std::get<Invalid>(q).reason : std::string("valid");
  };
  CHECK(why({{"status", "finished"}}) == "status record without header 'job-id'");
  CHECK(why({{"job-id", "j1"}}) == "status record without header 'status'");
  CHECK(why({{"job-id", "j1"}, {"status", "done"}}) ==
        "header 'status' must be 'running', 'finished' or 'failed': \"done\"");
  CHECK_THAT(why({{"job-id", "j1"}, {"status", "failed"}, {"retry-after-ms", "soon"}}),
             Catch::StartsWith("header 'retry-after-ms' must be"));
}

TEST_CASE("repeat-cron makes a calendar repeat, its first occurrence at or after deliver-at or the timestamp",
          "[unit][ingest][cron]") {
  // deliver-at 2026-11-22T10:00:00.123Z is a Sunday: the first weekday 09:00 in Berlin is Monday's.
  Record rec = valid_with("repeat-cron", "0 9 * * MON-FRI");
  rec.headers.push_back({"repeat-tz", "Europe/Berlin"});
  rec.headers.push_back({"repeat-until", "2026-12-31T00:00:00Z"});
  rec.headers.push_back({"repeat-catchup", "none"});
  rec.headers.push_back({"repeat-count", "20"});
  ScheduleJob job = schedule_of(rec);
  CHECK(job.deliver_at_ms == 1'795'420'800'000);
  CHECK(job.repeat.cron == "0 9 * * MON-FRI");
  CHECK(job.repeat.tz == "Europe/Berlin");
  CHECK(job.repeat.until == std::optional<std::int64_t>(1'798'675'200'000));
  CHECK(job.repeat.catchup == delayd::storage::Catchup::none);
  CHECK(job.repeat.count == 20);
  CHECK(job.repeat.every.count() == 0);
  // Without deliver-at: from the record's timestamp (2023-11-14T22:13:20Z), in UTC by default.
  rec = record({{"business", "orders"}, {"job-id", "c-1"}, {"repeat-cron", "0 9 * * *"}});
  job = schedule_of(rec);
  CHECK(job.deliver_at_ms == 1'700'038'800'000);
  CHECK(job.repeat.tz == "UTC");
  CHECK(job.repeat.catchup == delayd::storage::Catchup::latest);
  // At or after: an instant that matches is the first occurrence itself.
  rec = record({{"business", "orders"}, {"deliver-at", "1700038800000"}, {"repeat-cron", "0 9 * * *"}});
  CHECK(schedule_of(rec).deliver_at_ms == 1'700'038'800'000);
  // Interval repeats take repeat-until and repeat-catchup too.
  rec = valid_with("repeat-every-ms", "1000");
  rec.headers.push_back({"repeat-catchup", "all"});
  CHECK(schedule_of(rec).repeat.catchup == delayd::storage::Catchup::all);
}

TEST_CASE("bad repeat headers are bad records whose reason names the header", "[unit][ingest][cron]") {
  auto with = [](Headers extra) {
    Record rec = valid_with("repeat-cron", "0 9 * * *");
    for (auto& h : extra) rec.headers.push_back(std::move(h));
    return reason_of(rec);
  };
  CHECK_THAT(reason_of(valid_with("repeat-cron", "61 * * * *")),
             Catch::StartsWith("header 'repeat-cron' is not a cron expression: minute"));
  CHECK(with({{"repeat-every-ms", "1000"}}) == "headers 'repeat-cron' and 'repeat-every-ms' given: one or the other");
  CHECK_THAT(with({{"repeat-tz", "Mars/Olympus"}}), Catch::StartsWith("header 'repeat-tz' is not a time zone"));
  CHECK(reason_of(valid_with("repeat-tz", "UTC")) == "header 'repeat-tz' given without 'repeat-cron'");
  CHECK_THAT(with({{"repeat-until", "tomorrow"}}),
             Catch::StartsWith("header 'repeat-until' is not epoch milliseconds"));
  CHECK_THAT(with({{"repeat-until", "1000"}}),
             Catch::StartsWith("header 'repeat-until' is before the first occurrence"));
  CHECK_THAT(with({{"repeat-catchup", "some"}}), Catch::StartsWith("header 'repeat-catchup' must be 'latest', 'all'"));
  CHECK(reason_of(valid_with("repeat-catchup", "all")) ==
        "header 'repeat-catchup' given without 'repeat-every-ms' or 'repeat-cron'");
  CHECK(reason_of(valid_with("repeat-until", "1000")) ==
        "header 'repeat-until' given without 'repeat-every-ms' or 'repeat-cron'");
  CHECK_THAT(reason_of(valid_with("repeat-cron", "0 0 30 2 *")),
             Catch::StartsWith("header 'repeat-cron' names no instant at or after"));
  CHECK(reason_of(valid_with("repeat-cron", std::optional<std::string>{})) == "header 'repeat-cron' is null");
}

TEST_CASE("max-lateness-ms bounds how late any job may be delivered", "[unit][ingest][cron]") {
  CHECK(schedule_of(valid_with("max-lateness-ms", "1500")).max_lateness_ms == 1500);
  CHECK(schedule_of(valid_with("job-id", "no-limit")).max_lateness_ms == 0);
  CHECK_THAT(reason_of(valid_with("max-lateness-ms", "0")), Catch::StartsWith("header 'max-lateness-ms' must be"));
  CHECK_THAT(reason_of(valid_with("max-lateness-ms", "soon")), Catch::StartsWith("header 'max-lateness-ms' must be"));
}
