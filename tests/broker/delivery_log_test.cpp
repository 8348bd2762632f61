// The delivery log's records (broker/delivery_log.hpp): what a transaction writes for a ready
// record or a dead letter, and what a takeover reads back, a repeat's occurrence included.
#include "broker/delivery_log.hpp"

#include <catch2/catch.hpp>
#include <optional>
#include <string>

using delayd::broker::log_record;
using delayd::broker::LoggedDelivery;
using delayd::broker::parse_log_record;
using delayd::broker::TagKind;

namespace {

delayd::connectors::OutRecord ready(const std::string& id, const std::string& attempt,
                                    std::optional<std::string> repeat = std::nullopt) {
  delayd::connectors::OutRecord r;
  r.topic = "ready.orders";
  r.key = "k";
  r.value = "v";
  r.headers = {{"job-id", id}, {"attempt", attempt}};
  if (repeat) r.headers.push_back({"repeat", *repeat});
  return r;
}

// What a takeover reads of the log record written for `rec`.
std::optional<LoggedDelivery> round_trip(const delayd::connectors::OutRecord& rec, TagKind kind) {
  const auto out = log_record(rec, kind, "orders.ingest.delivered", 2);
  if (!out) return std::nullopt;
  CHECK(out->topic == "orders.ingest.delivered");
  CHECK(out->partition == 2);
  delayd::connectors::Record read;
  read.key = out->key;
  read.value = out->value;
  return parse_log_record(read);
}

}  // namespace

TEST_CASE("a ready record is logged with its attempt, and a repeat's with its occurrence", "[delivery_log]") {
  const auto plain = log_record(ready("a", "3"), TagKind::ready, "t", 0);
  REQUIRE(plain);
  CHECK(plain->key == "a");
  CHECK(plain->value == "ready 3");
  CHECK(round_trip(ready("a", "3"), TagKind::ready) == LoggedDelivery{"a", 3, 0, LoggedDelivery::Kind::ready, ""});

  // Every occurrence of a repeat is attempt 1: the occurrence tells them apart.
  const auto occurrence = log_record(ready("r", "1", "2"), TagKind::ready, "t", 0);
  REQUIRE(occurrence);
  CHECK(occurrence->value == "ready 1/2");
  CHECK(round_trip(ready("r", "1", "2"), TagKind::ready) == LoggedDelivery{"r", 1, 2, LoggedDelivery::Kind::ready, ""});
  CHECK(round_trip(ready("r", "1", "1"), TagKind::ready) != round_trip(ready("r", "1", "2"), TagKind::ready));
}

TEST_CASE("a dead letter is logged with its attempt, occurrence and reason", "[delivery_log]") {
  auto dead = ready("d", "5", "4");
  dead.headers.push_back({"error", "reported failed after 5 attempts: no"});
  const auto out = log_record(dead, TagKind::failed_dlq, "t", 0);
  REQUIRE(out);
  CHECK(out->value == "dead 5/4 reported failed after 5 attempts: no");
  CHECK(round_trip(dead, TagKind::failed_dlq) ==
        LoggedDelivery{"d", 5, 4, LoggedDelivery::Kind::dead, "reported failed after 5 attempts: no"});
}

TEST_CASE("what a log record cannot say is not read as a delivery", "[delivery_log]") {
  // No job-id, no attempt, a bad attempt or occurrence: not a job's record, nothing logged.
  auto no_id = ready("x", "1");
  no_id.headers.erase(no_id.headers.begin());
  CHECK_FALSE(log_record(no_id, TagKind::ready, "t", 0));
  CHECK_FALSE(log_record(ready("x", "0"), TagKind::ready, "t", 0));
  CHECK_FALSE(log_record(ready("x", "1", "0"), TagKind::ready, "t", 0));
  CHECK_FALSE(log_record(ready("x", "1"), TagKind::follow_up, "t", 0));
  // Log values that are not ours parse to nothing, never to a delivery.
  for (const char* v :
       {"ready", "ready x", "ready 1/", "ready 1/x", "ready /2", "ready 1/2/3", "dead", "dead x y", "other 1"}) {
    delayd::connectors::Record r;
    r.key = "x";
    r.value = v;
    INFO(v);
    CHECK_FALSE(parse_log_record(r));
  }
  // A record of an earlier release: the attempt alone, no occurrence named.
  delayd::connectors::Record old;
  old.key = "r";
  old.value = "ready 1";
  CHECK(parse_log_record(old) == LoggedDelivery{"r", 1, 0, LoggedDelivery::Kind::ready, ""});
}
