// The client test vectors (clients/vectors/*.json) against delayd's own parser: every good
// vector's record must be accepted with the fields the vector names, and every bad vector that
// delayd itself refuses must be refused with the vector's message. Clients in any language are
// tested against the same vectors, so a client and delayd cannot drift apart unnoticed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "contract/ingest_parse.hpp"
#include "storage/repeat_rule.hpp"

using namespace delayd::contract;
using delayd::connectors::Header;
using delayd::connectors::Headers;
using delayd::connectors::Record;
using json = nlohmann::json;

namespace {

// The contract version the vectors are written for; the clients state the same.
constexpr int kVectorsContractVersion = 1;

std::vector<std::filesystem::path> vector_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(DELAYD_CLIENT_VECTORS_DIR)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

json load(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

std::optional<std::string> opt_string(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<std::string>();
}

// The record as delayd reads it: where the vectors say it was read (see their "about").
Record to_record(const json& v) {
  const json& r = v.at("record");
  Record rec;
  rec.topic = r.at("topic") == "status" ? "delay-status" : "delay-ingest";
  rec.partition = 3;
  rec.offset = 42;
  rec.timestamp_ms = v.at("timestamp_ms").get<std::int64_t>();
  rec.key = opt_string(r.at("key"));
  rec.value = opt_string(r.at("value"));
  for (const auto& h : r.at("headers")) rec.headers.push_back(Header{h.at(0).get<std::string>(), opt_string(h.at(1))});
  return rec;
}

Headers to_headers(const json& list) {
  Headers out;
  for (const auto& h : list) out.push_back(Header{h.at(0).get<std::string>(), opt_string(h.at(1))});
  return out;
}

IngestRules rules() {
  IngestRules r;  // ready_topic_template "ready.{business}", the defaults otherwise
  r.ingest_topics = {"delay-ingest"};
  r.dlq_topic = "delay-dlq";
  return r;
}

std::string reason_of(const Record& rec) {
  if (rec.topic == "delay-status") {
    const auto parsed = parse_status(rec);
    const auto* bad = std::get_if<Invalid>(&parsed);
    return bad != nullptr ? bad->reason : "(accepted)";
  }
  const auto parsed = parse_ingest(rec, rules());
  const auto* bad = std::get_if<Invalid>(&parsed);
  return bad != nullptr ? bad->reason : "(accepted)";
}

void check_schedule(const ScheduleJob& job, const json& p) {
  CHECK(job.job_id == p.at("job_id").get<std::string>());
  CHECK(job.job_id_derived == p.at("job_id").get<std::string>().starts_with(kDerivedJobIdPrefix));
  CHECK(job.deliver_at_ms == p.at("deliver_at_ms").get<std::int64_t>());
  CHECK(job.business == p.at("business").get<std::string>());
  CHECK(job.ready_topic == p.at("ready_topic").get<std::string>());
  CHECK(job.key == opt_string(p.at("key")));
  CHECK(job.value == opt_string(p.at("value")));
  CHECK(job.carried == to_headers(p.at("carried")));
  CHECK(job.upsert == p.at("upsert").get<bool>());
  CHECK(job.max_lateness_ms == p.at("max_lateness_ms").get<std::int64_t>());
  const json& r = p.at("repeat");
  if (r.is_null()) {
    CHECK_FALSE(job.repeat.repeats());
    return;
  }
  CHECK(job.repeat.every.count() == r.at("every_ms").get<std::int64_t>());
  CHECK(job.repeat.count == r.at("count").get<std::int64_t>());
  CHECK(job.repeat.cron == r.at("cron").get<std::string>());
  CHECK(job.repeat.tz == r.at("tz").get<std::string>());
  CHECK(job.repeat.until ==
        (r.at("until_ms").is_null() ? std::nullopt : std::optional(r.at("until_ms").get<std::int64_t>())));
  CHECK(job.repeat.catchup == delayd::storage::parse_catchup(r.at("catchup").get<std::string>()));
}

}  // namespace

TEST_CASE("client vectors: every file states the contract version and has vectors", "[client_vectors]") {
  const auto files = vector_files();
  REQUIRE(files.size() >= 4);
  for (const auto& f : files) {
    INFO(f.string());
    const json j = load(f);
    CHECK(j.at("contract_version").get<int>() == kVectorsContractVersion);
    CHECK_FALSE(j.at("good").empty());
    CHECK_FALSE(j.at("bad").empty());
  }
}

TEST_CASE("client vectors: delayd's parser accepts every good record with the intended fields", "[client_vectors]") {
  int checked = 0;
  for (const auto& f : vector_files()) {
    const json doc = load(f);  // kept: a range-for over a temporary's member would dangle
    for (const json& v : doc.at("good")) {
      INFO(f.filename().string() << ": " << v.at("name").get<std::string>());
      const Record rec = to_record(v);
      const json& p = v.at("parsed");
      const std::string call = v.at("call");
      if (call == "report") {
        REQUIRE(v.at("record").at("topic") == "status");
        const auto parsed = parse_status(rec);
        const auto* report = std::get_if<StatusReport>(&parsed);
        REQUIRE(report != nullptr);
        CHECK(report->job_id == p.at("job_id").get<std::string>());
        CHECK(to_string(report->status) == p.at("status").get<std::string>());
        CHECK(report->error == p.at("error").get<std::string>());
        CHECK(report->retry_after_ms == (p.at("retry_after_ms").is_null()
                                             ? std::nullopt
                                             : std::optional(p.at("retry_after_ms").get<std::int64_t>())));
        CHECK(report->attempt == p.at("attempt").get<int>());
        // Every record of a job has the job's key.
        CHECK(rec.key == std::optional(report->job_id));
      } else {
        REQUIRE(v.at("record").at("topic") == "ingest");
        const auto parsed = parse_ingest(rec, rules());
        if (call == "schedule") {
          const auto* job = std::get_if<ScheduleJob>(&parsed);
          REQUIRE(job != nullptr);
          check_schedule(*job, p);
          if (!job->job_id_derived) CHECK(rec.key == std::optional(job->job_id));
        } else if (call == "cancel") {
          const auto* cancel = std::get_if<CancelJob>(&parsed);
          REQUIRE(cancel != nullptr);
          CHECK(cancel->job_id == p.at("job_id").get<std::string>());
          // The client's cancel is delayd's own cancel record.
          const auto own = cancel_record("delay-ingest", cancel->job_id);
          CHECK(rec.key == own.key);
          CHECK(rec.headers == own.headers);
          CHECK(rec.value == own.value);
        } else {
          REQUIRE(call == "reschedule");
          const auto* move = std::get_if<RescheduleJob>(&parsed);
          REQUIRE(move != nullptr);
          CHECK(move->job_id == p.at("job_id").get<std::string>());
          CHECK(move->deliver_at_ms == p.at("deliver_at_ms").get<std::int64_t>());
          CHECK(rec.key == std::optional(move->job_id));
        }
      }
      ++checked;
    }
  }
  CHECK(checked >= 20);
}

TEST_CASE("client vectors: delayd's parser refuses every bad record with the vector's message", "[client_vectors]") {
  int checked = 0;
  for (const auto& f : vector_files()) {
    const json doc = load(f);  // kept: a range-for over a temporary's member would dangle
    for (const json& v : doc.at("bad")) {
      INFO(f.filename().string() << ": " << v.at("name").get<std::string>());
      const std::string by = v.at("checked_by");
      if (by == "client") {
        // A client-only rule has no record and says why delayd does not check it.
        CHECK_FALSE(v.contains("record"));
        CHECK_FALSE(v.at("why").get<std::string>().empty());
        continue;
      }
      REQUIRE((by == "parser" || by == "delayd"));
      CHECK(reason_of(to_record(v)) == v.at("error").get<std::string>());
      ++checked;
    }
  }
  CHECK(checked >= 30);
}
