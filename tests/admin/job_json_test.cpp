// The job view of GET /jobs/{id} and delayctl get: the payload preview keeps every byte it shows
// (text when it is printable UTF-8, base64 otherwise), is cut at kPreviewBytes with the whole
// size given, and a payload that looks like markup stays a JSON string.
#include "admin/job_json.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "storage/header_codec.hpp"
#include "support/unbase64.hpp"

using delayd::admin::job_to_json;
using delayd::admin::kPreviewBytes;
using delayd::admin::to_text;
using Fields = std::map<std::string, std::string>;

using delayd::testing::unbase64;

namespace {

// A waiting job's fields as JobStore::get() gives them, with this key, value and headers.
Fields job_with(const std::string& key, const std::string& value, const delayd::storage::StoredHeaders& headers = {}) {
  return {{"state", "delay"},
          {"attempt", "0"},
          {"deliver_at", "1795000000123"},
          {"business", "orders"},
          {"key", key},
          {"value", value},
          {"headers", delayd::storage::encode_headers(headers)}};
}

}  // namespace

TEST_CASE("job view: a text key and value are shown as text", "[admin][job_json]") {
  const auto j = job_to_json("order-42", job_with("order-42", "{\"order\": 42, \"note\": \"caf\xc3\xa9\"}"));
  CHECK(j["key"] == "order-42");
  CHECK(j["key_encoding"] == "text");
  CHECK(j["value"] == "{\"order\": 42, \"note\": \"caf\xc3\xa9\"}");
  CHECK(j["value_encoding"] == "text");
  CHECK_FALSE(j.contains("value_truncated"));
  CHECK_FALSE(j.contains("value_bytes"));
  CHECK(j["deliver_at_iso"] == "2026-11-18T11:06:40.123Z");  // the rest as before
}

TEST_CASE("job view: binary bytes are base64 and round-trip, where U+FFFD would have lost them", "[admin][job_json]") {
  const std::string binary("\x00\x01\xff\xfe\x80 protobuf?\x1b", 16);
  const auto j = job_to_json("b", job_with("k\xff", binary));
  CHECK(j["value_encoding"] == "base64");
  CHECK(unbase64(j["value"].get<std::string>()) == binary);
  CHECK(j["key_encoding"] == "base64");
  CHECK(unbase64(j["key"].get<std::string>()) == "k\xff");
  CHECK_FALSE(j.contains("value_truncated"));
  // The whole view prints without a replacement character.
  CHECK(to_text(j).find("\xef\xbf\xbd") == std::string::npos);
}

TEST_CASE("job view: a 10 000-byte value is cut at 4096 bytes, with its whole size", "[admin][job_json]") {
  REQUIRE(kPreviewBytes == 4096);
  const auto text = job_to_json("t", job_with("k", std::string(10'000, 'a')));
  CHECK(text["value"] == std::string(4096, 'a'));
  CHECK(text["value_encoding"] == "text");
  CHECK(text["value_truncated"] == true);
  CHECK(text["value_bytes"] == 10'000);
  CHECK_FALSE(text.contains("key_truncated"));

  std::string bytes;
  for (int i = 0; i < 10'000; ++i) bytes.push_back(static_cast<char>(i & 0xff));
  const auto binary = job_to_json("b", job_with("k", bytes));
  CHECK(binary["value_encoding"] == "base64");
  CHECK(unbase64(binary["value"].get<std::string>()) == bytes.substr(0, 4096));  // cut before encoding
  CHECK(binary["value_truncated"] == true);
  CHECK(binary["value_bytes"] == 10'000);

  // A cut never splits a character: the text stays text, a little shorter.
  std::string euros;
  while (euros.size() < 5000) euros += "\xe2\x82\xac";  // 3 bytes each; 4096 is not a multiple
  const auto cut = job_to_json("e", job_with("k", euros));
  CHECK(cut["value_encoding"] == "text");
  CHECK(cut["value"].get<std::string>().size() == 4095);
  CHECK(cut["value_bytes"] == euros.size());
}

TEST_CASE("job view: markup in a payload stays the literal text of a JSON string", "[admin][job_json]") {
  const std::string script = "<script>alert(1)</script>";
  const auto j = job_to_json("x", job_with(script, script, {{"trace", script}}));
  CHECK(j["value"] == script);
  CHECK(j["value_encoding"] == "text");
  CHECK(j["key"] == script);
  const std::string printed = to_text(j);
  CHECK_THAT(printed, Catch::Contains("\"value\": \"<script>alert(1)</script>\""));
  CHECK(nlohmann::json::parse(printed)["value"] == script);  // a string, read back as it was
}

TEST_CASE("job view: header values get the same preview, a null one stays null", "[admin][job_json]") {
  const auto j = job_to_json(
      "h", job_with("k", "v", {{"trace-id", "abc"}, {"blob", std::string("\x00\xff", 2)}, {"none", std::nullopt}}));
  REQUIRE(j["headers"].size() == 3);
  CHECK(j["headers"][0]["name"] == "trace-id");
  CHECK(j["headers"][0]["value"] == "abc");
  CHECK(j["headers"][0]["value_encoding"] == "text");
  CHECK(j["headers"][1]["value"] == "AP8=");
  CHECK(j["headers"][1]["value_encoding"] == "base64");
  CHECK(j["headers"][2]["value"].is_null());
  CHECK_FALSE(j["headers"][2].contains("value_encoding"));
}

TEST_CASE("job view: no payload, or a null key, as before", "[admin][job_json]") {
  Fields f = job_with("k", "v");
  f.erase("key");
  const auto j = job_to_json("n", f);
  CHECK(j["key"].is_null());
  CHECK_FALSE(j.contains("key_encoding"));
  const auto finished = job_to_json("f", {{"state", "finished"}, {"attempt", "1"}});
  CHECK(finished["payload_deleted"] == true);
  CHECK_FALSE(finished.contains("value_encoding"));
}

TEST_CASE("a waiting calendar repeat shows its next three occurrences in its zone", "[admin][cron]") {
  std::map<std::string, std::string> fields{{"state", "delay"},
                                            {"deliver_at", "1795420800000"},
                                            {"attempt", "0"},
                                            {"business", "mail"},
                                            {"repeat", "1"},
                                            {"repeat_cron", "0 9 * * MON-FRI"},
                                            {"repeat_tz", "Europe/Berlin"}};
  nlohmann::json j = delayd::admin::job_to_json("report-daily", fields);
  REQUIRE(j.contains("next_occurrences"));
  const nlohmann::json& next = j["next_occurrences"];
  REQUIRE(next.size() == 3);
  CHECK(next[0] == nlohmann::json{{"at", 1795420800000}, {"at_local", "2026-11-23T09:00:00+01:00"}, {"repeat", 1}});
  CHECK(next[1]["at_local"] == "2026-11-24T09:00:00+01:00");
  CHECK(next[2]["repeat"] == 3);
  // Friday's next is Monday's; repeat-until cuts the list short.
  fields["deliver_at"] = "1795507200000";
  fields["repeat_until"] = "1795593600000";
  j = delayd::admin::job_to_json("report-daily", fields);
  CHECK(j["next_occurrences"].size() == 2);
  CHECK(j["repeat_until_iso"] == "2026-11-25T08:00:00.000Z");
  // Not waiting, or not a calendar repeat: none.
  fields["state"] = "ready";
  CHECK_FALSE(delayd::admin::job_to_json("report-daily", fields).contains("next_occurrences"));
  fields["state"] = "delay";
  fields.erase("repeat_cron");
  CHECK_FALSE(delayd::admin::job_to_json("report-daily", fields).contains("next_occurrences"));
}
