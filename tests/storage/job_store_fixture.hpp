// The fixtures of the JobStore tests (job_store_*_test.cpp): a store on the real Redis of the
// local stack, under a key prefix of its own that the fixture deletes after the test, and the
// helpers that look at what the scripts left in Redis.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "redis/connection.hpp"
#include "storage/job_record.hpp"
#include "storage/job_store.hpp"
#include "support/job_records.hpp"
#include "support/pending_entries.hpp"
#include "support/redis_cleanup.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

namespace delayd::storage::test {

using redis::RedisConnection;

using Ids = std::vector<std::string>;

struct Fixture {
  RedisConnection redis{delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL"))};
  KeySchema keys{delayd::testing::unique_name("t")};
  JobStore store{redis, keys, 3600};
  const std::string shard = shard_id("delay-ingest", 0);

  NewJob job(const std::string& id, std::int64_t at, std::string business = "orders") {
    NewJob j;
    j.job_id = id;
    j.deliver_at = at;
    j.business = business;
    j.shard = shard;
    j.key = "k-" + id;
    j.value = "v-" + id;
    j.headers = {{"trace", "abc"}, {"nullh", std::nullopt}};
    return j;
  }
  std::vector<PendingEntry> pending() { return store.pending_between(shard, std::nullopt, INT64_MAX, 1000); }
  // A field as store.get() (and so delayctl get) shows it; "<nil>" if absent.
  std::string field(const std::string& id, const std::string& f) {
    auto job = store.get(id);
    if (!job || !job->count(f)) return "<nil>";
    return job->at(f);
  }
  bool has_payload(const std::string& id) { return field(id, "headers") != "<nil>"; }
  // The record as a person sees it with redis-cli HGET (a delay job's) or GET (any other's).
  std::string record(const std::string& id) {
    return delayd::testing::record_of(redis, keys, shard, id).value_or("<nil>");
  }
  void set_record(const std::string& id, const std::string& v) {
    delayd::testing::put_record(redis, keys, shard, id, v);
  }
  // The record's time to live in seconds: -1 in the shard's hash (a delay record never expires),
  // else its key's TTL (-2: no record).
  std::int64_t ttl(const std::string& id) {
    if (redis.command({"HEXISTS", keys.delay_records(shard), id}).view().integer() == 1) return -1;
    return redis.command({"TTL", keys.job(shard, id)}).view().integer();
  }
  // Every job of the shard whose pending entry is not where its record says (pending_score():
  // at the later of deliver_at and nb for a delay job, at nb for a ready or running one, none
  // otherwise), as "<id>: entry <score or none>, record '<line>'"; empty when all agree.
  std::vector<std::string> misplaced() {
    std::map<std::string, std::string> entries;
    for (const auto& [id, score] : delayd::testing::pending_entries(redis, keys, shard)) {
      entries[id] = std::to_string(score);
    }
    std::vector<std::string> out;
    for (const std::string& id : delayd::testing::record_ids(redis, keys, shard)) {
      const std::string line = record(id).substr(0, record(id).find('\n'));
      const auto r = parse_job_record(record(id));
      const auto want = r ? pending_score(*r) : std::nullopt;
      const auto it = entries.find(id);
      const std::string have = it == entries.end() ? "none" : it->second;
      if (have != (want ? std::to_string(*want) : "none"))
        out.push_back(id + ": entry " + have + ", record '" + line + "'");
      if (it != entries.end()) entries.erase(it);
    }
    for (const auto& [id, score] : entries) out.push_back(id + ": entry " + score + ", no record");
    return out;
  }
  ~Fixture() { delayd::testing::delete_prefixed_keys(redis, keys.prefix()); }
};

// ---- the job lifecycle (docs/consuming.md, "Job lifecycle"): reports, redelivery, reschedule, repeats ----

using Mode = JobStore::Mode;

struct Lifecycle : Fixture {
  // Accepts, claims at `at` and marks ready at `at` in the given mode; returns mark_ready's answer.
  Transition deliver(const std::string& id, std::int64_t at, Mode mode, std::int64_t ack_ms = 0) {
    store.accept(std::vector<NewJob>{job(id, at)}, 0);
    return deliver_again(id, at, mode, ack_ms);
  }
  Transition deliver_again(const std::string& id, std::int64_t now, Mode mode, std::int64_t ack_ms = 0) {
    auto c = store.claim(shard, Ids{id}, now);
    REQUIRE(c[0].kind == Claim::Kind::deliver);
    const JobStore::Delivered d{id, c[0].deliver_at, c[0].attempt, "orders", mode, std::chrono::milliseconds(ack_ms)};
    return store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), now)[0];
  }
  ReportOutcome report(const std::string& id, ReportStatus status, std::int64_t now, std::int64_t retry_at = 0,
                       int max_attempts = 3, std::int64_t ack_ms = 0, int about = 0) {
    Report r{id, status, "boom", retry_at, max_attempts, std::chrono::milliseconds(ack_ms), about};
    const auto where = store.locate(Ids{id});
    const std::vector<std::string> shards{where[0] ? where[0]->shard : std::string()};
    return store.report(std::span<const Report>(&r, 1), shards, now)[0];
  }
  // Accepts the job `id` due at `at`, repeating every `every_ms`, `count` times (0: no end).
  void accept_every(const std::string& id, std::int64_t at, std::int64_t every_ms, std::int64_t count = 0) {
    NewJob j = job(id, at);
    j.repeat.every = std::chrono::milliseconds(every_ms);
    j.repeat.count = count;
    store.accept(std::vector<NewJob>{j}, 0);
  }
  std::optional<std::int64_t> score(const std::string& id) {
    return delayd::testing::pending_score_of(redis, keys, shard, id);
  }
};

}  // namespace delayd::storage::test
