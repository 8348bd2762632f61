// The etf1 and Chronos record formats (contract/peer_formats.hpp), record by record. The cases
// follow the peers' own contracts: etf1's README and scheduler tests (TestScheduler_update_epoch
// and its neighbours), Chronos's README; the end-to-end suites (tests/e2e/peer_formats_test.cpp)
// run them through delayd.
#include "contract/peer_formats.hpp"

#include <catch2/catch.hpp>

using namespace delayd::contract;
using delayd::connectors::Header;
using delayd::connectors::Headers;
using delayd::connectors::Record;

namespace {

IngestRules rules() {
  IngestRules r;
  r.ingest_topics = {"delay-ingest", "schedules"};
  r.dlq_topic = "delay-ingest.dlq";
  r.max_value_bytes = 1000;
  r.chronos_output_topic = "chronos.out";
  return r;
}

// An etf1 schedule for `epoch_s` to "target", key "sched-1", produced at 1 700 000 000 000.
Record etf1(Headers headers, std::optional<std::string> value = std::string("payload")) {
  Record rec;
  rec.topic = "schedules";
  rec.partition = 2;
  rec.offset = 7;
  rec.timestamp_ms = 1'700'000'000'000;
  rec.key = "sched-1";
  rec.value = std::move(value);
  rec.headers = std::move(headers);
  return rec;
}

Headers etf1_headers(std::string epoch = "1700000100") {
  return {{"scheduler-epoch", std::move(epoch)}, {"scheduler-target-topic", "target"}, {"scheduler-target-key", "tk"}};
}

std::string reason(const ParsedIngest& p) {
  const auto* bad = std::get_if<Invalid>(&p);
  return bad ? bad->reason : "(valid)";
}

Record chronos(Headers headers) {
  Record rec;
  rec.topic = "chronos.in";
  rec.partition = 0;
  rec.offset = 3;
  rec.timestamp_ms = 1'700'000'000'000;
  rec.key = "ck";
  rec.value = "{\"a\": 1}";
  rec.headers = std::move(headers);
  return rec;
}

}  // namespace

TEST_CASE("an etf1 schedule becomes an upsert to its target topic, every header carried in order", "[unit][etf1]") {
  Record rec = etf1(etf1_headers());
  rec.headers.insert(rec.headers.begin() + 1, Header{"trace", "abc"});
  const ParsedIngest p = parse_etf1(rec, rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(p));
  const ScheduleJob& j = std::get<ScheduleJob>(p);
  CHECK(j.job_id == "sched-1");
  CHECK(j.upsert);
  CHECK(j.deliver_at_ms == 1'700'000'100'000);  // seconds, not milliseconds
  CHECK(j.business == "topic:target");
  CHECK(j.ready_topic == "target");
  CHECK(j.key == std::optional<std::string>("tk"));
  CHECK(j.value == std::optional<std::string>("payload"));
  const Headers want = {{"scheduler-epoch", "1700000100"},     {"trace", "abc"},
                        {"scheduler-target-topic", "target"},  {"scheduler-target-key", "tk"},
                        {"scheduler-timestamp", "1700000000"}, {"scheduler-key", "sched-1"},
                        {"scheduler-topic", "schedules"}};
  CHECK(j.carried == want);
}

TEST_CASE("etf1: no target key gives a null key, a tombstone cancels, delayd's own is ignored", "[unit][etf1]") {
  Headers h = etf1_headers();
  h.pop_back();
  const ParsedIngest p = parse_etf1(etf1(h), rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(p));
  CHECK_FALSE(std::get<ScheduleJob>(p).key.has_value());
  Headers null_key = etf1_headers();
  null_key.back().value = std::nullopt;
  CHECK_FALSE(std::get<ScheduleJob>(parse_etf1(etf1(null_key), rules())).key.has_value());

  const ParsedIngest tomb = parse_etf1(etf1({}, std::nullopt), rules());
  REQUIRE(std::holds_alternative<CancelJob>(tomb));
  CHECK(std::get<CancelJob>(tomb).job_id == "sched-1");
  const ParsedIngest own = parse_etf1(etf1({{"delayd-tombstone", "fired"}}, std::nullopt), rules());
  CHECK(std::holds_alternative<Ignored>(own));
  const auto marked = etf1_tombstone("schedules", 2, "sched-1", "fired");
  CHECK(marked.partition == 2);
  CHECK(marked.key == std::optional<std::string>("sched-1"));
  CHECK_FALSE(marked.value.has_value());
  Record back = etf1({}, std::nullopt);
  back.headers = marked.headers;
  CHECK(std::holds_alternative<Ignored>(parse_etf1(back, rules())));
}

TEST_CASE("etf1: the key becomes the job-id, bytes outside printable ASCII percent-encoded", "[unit][etf1]") {
  CHECK(etf1_job_id("plain-id_1") == "plain-id_1");
  CHECK(etf1_job_id("a b%c") == "a%20b%25c");
  CHECK(etf1_job_id(std::string("\x00\xff", 2)) == "%00%FF");
  Record rec = etf1(etf1_headers());
  rec.key = "caf\xc3\xa9 1";
  const ParsedIngest p = parse_etf1(rec, rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(p));
  CHECK(std::get<ScheduleJob>(p).job_id == "caf%C3%A9%201");
  // scheduler-key carries the key itself, byte for byte.
  CHECK(std::get<ScheduleJob>(p).carried[4].value == std::optional<std::string>("caf\xc3\xa9 1"));
}

TEST_CASE("etf1: invalid records name what is wrong", "[unit][etf1]") {
  Record blank = etf1(etf1_headers());
  blank.key = "";
  CHECK(reason(parse_etf1(blank, rules())) == "etf1 schedule without a key (the schedule id)");
  blank.key = std::nullopt;
  CHECK(reason(parse_etf1(blank, rules())) == "etf1 schedule without a key (the schedule id)");
  Record long_key = etf1(etf1_headers());
  long_key.key = std::string(70, ' ');  // 210 characters once encoded
  CHECK_THAT(reason(parse_etf1(long_key, rules())), Catch::StartsWith("etf1 schedule id is 210 characters"));
  CHECK_THAT(reason(parse_etf1(etf1(etf1_headers("-5")), rules())),
             Catch::StartsWith("header 'scheduler-epoch' must be whole seconds since 1970"));
  CHECK_THAT(reason(parse_etf1(etf1(etf1_headers("1.5")), rules())),
             Catch::StartsWith("header 'scheduler-epoch' must be whole seconds"));
  CHECK_THAT(reason(parse_etf1(etf1(etf1_headers("253402300800")), rules())), Catch::Contains("up to year 9999"));
  CHECK(reason(parse_etf1(etf1({{"scheduler-target-topic", "target"}}), rules())) ==
        "etf1 schedule without header 'scheduler-epoch' (or it is null)");
  CHECK(reason(parse_etf1(etf1({{"scheduler-epoch", "1"}}), rules())) ==
        "etf1 schedule without header 'scheduler-target-topic' (or it is null)");
  CHECK_THAT(reason(parse_etf1(etf1({{"scheduler-epoch", "1"}, {"scheduler-target-topic", "schedules"}}), rules())),
             Catch::Contains("delayd's own ingest or DLQ topic"));
  CHECK_THAT(reason(parse_etf1(etf1({{"scheduler-epoch", "1"}, {"scheduler-target-topic", "bad topic"}}), rules())),
             Catch::Contains("not a legal Kafka topic name"));
  IngestRules only = rules();
  only.allowed_businesses = {"other"};
  CHECK_THAT(reason(parse_etf1(etf1(etf1_headers()), only)), Catch::Contains("not in kafka.allowed_businesses"));
  CHECK_THAT(reason(parse_etf1(etf1(etf1_headers(), std::string(1001, 'v')), rules())),
             Catch::StartsWith("value is 1001 bytes"));
}

TEST_CASE("etf1.past_due = drop drops a schedule past due when produced, beyond the grace", "[unit][etf1]") {
  IngestRules drop = rules();
  drop.etf1_drop_past_due = true;
  drop.etf1_grace_ms = 10'000;
  // Produced at 1 700 000 000 s: 9 s late is within the grace, 11 s late is not.
  CHECK(std::holds_alternative<ScheduleJob>(parse_etf1(etf1(etf1_headers("1699999991")), drop)));
  const ParsedIngest late = parse_etf1(etf1(etf1_headers("1699999989")), drop);
  REQUIRE(std::holds_alternative<Dropped>(late));
  CHECK(std::get<Dropped>(late).job_id == "sched-1");
  CHECK_THAT(std::get<Dropped>(late).reason, Catch::Contains("past due when produced"));
  // fire (the default): the same record is a job, due at once.
  CHECK(std::holds_alternative<ScheduleJob>(parse_etf1(etf1(etf1_headers("1699999989")), rules())));
}

TEST_CASE("a Chronos record is delivered to the output topic unchanged, latest wins", "[unit][chronos]") {
  const Headers h = {{"chronosMessageId", "m-1"}, {"x", "y"}, {"chronosDeadline", "2026-11-24T10:00:00.5+01:00"}};
  const ParsedIngest p = parse_chronos(chronos(h), rules());
  REQUIRE(std::holds_alternative<ScheduleJob>(p));
  const ScheduleJob& j = std::get<ScheduleJob>(p);
  CHECK(j.job_id == "m-1");
  CHECK(j.upsert);
  CHECK(j.deliver_at_ms == 1'795'510'800'500);  // 09:00:00.5Z (date -d)
  CHECK(j.ready_topic == "chronos.out");
  CHECK(j.business == "topic:chronos.out");
  CHECK(j.key == std::optional<std::string>("ck"));
  CHECK(j.value == std::optional<std::string>("{\"a\": 1}"));
  CHECK(j.carried == h);
}

TEST_CASE("Chronos: op cancel and reschedule, and bad records", "[unit][chronos]") {
  const ParsedIngest c = parse_chronos(chronos({{"chronosMessageId", "m-1"}, {"op", "cancel"}}), rules());
  REQUIRE(std::holds_alternative<CancelJob>(c));
  CHECK(std::get<CancelJob>(c).job_id == "m-1");
  const ParsedIngest r = parse_chronos(
      chronos({{"chronosMessageId", "m-1"}, {"op", "reschedule"}, {"chronosDeadline", "2026-11-24T09:00:00Z"}}),
      rules());
  REQUIRE(std::holds_alternative<RescheduleJob>(r));
  CHECK(std::get<RescheduleJob>(r).deliver_at_ms == 1'795'510'800'000);

  CHECK(reason(parse_chronos(chronos({{"chronosMessageId", "m-1"}, {"chronosDeadline", "2026-11-24T09:00:00"}}),
                             rules())) ==
        "header 'chronosDeadline' has no UTC offset (add Z or +HH:MM): \"2026-11-24T09:00:00\"");
  CHECK_THAT(reason(parse_chronos(chronos({{"chronosMessageId", "m-1"}, {"chronosDeadline", "tomorrow"}}), rules())),
             Catch::StartsWith("header 'chronosDeadline' is not RFC 3339 with an offset"));
  CHECK(reason(parse_chronos(chronos({{"chronosDeadline", "2026-11-24T09:00:00Z"}}), rules())) ==
        "Chronos record without header 'chronosMessageId' (or it is null)");
  CHECK_THAT(reason(parse_chronos(chronos({{"chronosMessageId", "m 1"}, {"chronosDeadline", "2026-11-24T09:00:00Z"}}),
                                  rules())),
             Catch::StartsWith("header 'chronosMessageId' must be"));
  CHECK_THAT(reason(parse_chronos(chronos({{"chronosMessageId", "m-1"}, {"op", "upsert"}}), rules())),
             Catch::StartsWith("header 'op' must be 'schedule', 'cancel' or 'reschedule'"));
  IngestRules none = rules();
  none.chronos_output_topic.clear();
  CHECK(reason(parse_chronos(chronos({{"chronosMessageId", "m-1"}, {"chronosDeadline", "2026-11-24T09:00:00Z"}}),
                             none)) == "no chronos.output_topic is configured");
}
