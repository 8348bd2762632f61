// JobStore's compressed payloads (payload_compression.hpp): above the threshold, with a
// dictionary kept in Redis, and records that do not decompress.
#include <catch2/catch.hpp>
#include <span>
#include <string>
#include <vector>

#include "job_store_fixture.hpp"
#include "storage/payload_compression.hpp"

using namespace delayd::storage;
using namespace delayd::storage::test;
using namespace delayd::redis;

// ---- compressed payloads (payload_compression.hpp) ----

namespace {

// A JSON document like the ones jobs carry: field names repeat, about 1 KiB.
std::string order_json(int n) {
  std::string s = "{\"order_id\":\"ord-" + std::to_string(n) + "\",\"customer\":{\"id\":\"c-" + std::to_string(n * 7) +
                  "\",\"email\":\"customer" + std::to_string(n) + "@example.com\"},\"items\":[";
  for (int i = 0; i < 12; ++i) {
    if (i > 0) s += ',';
    s += "{\"sku\":\"SKU-" + std::to_string(1000 + i * 13 + n) + "\",\"quantity\":" + std::to_string(i + 1) +
         ",\"unit_price\":{\"amount\":" + std::to_string(199 + i * 100) + ",\"currency\":\"EUR\"}}";
  }
  return s + "],\"remind_at\":\"2026-12-02T10:00:00Z\",\"channel\":\"email\"}";
}

}  // namespace

TEST_CASE_METHOD(Lifecycle, "a payload above the threshold is stored compressed and every reader gets it back",
                 "[store][compress]") {
  store.compress_payloads_above(256);
  NewJob big = job("big", 10);
  big.value = order_json(1);
  REQUIRE(big.value->size() > 900);
  NewJob small = job("small", 10);  // below the threshold: stored as it is
  store.accept(std::vector<NewJob>{big, small}, 0);

  const std::string stored = record("big");
  CHECK(stored.rfind("delay 10 0 orders z=1\n", 0) == 0);
  CHECK(stored.size() < big.value->size() / 2);  // the record, header line and all
  CHECK(record("small").rfind("delay 10 0 orders\n", 0) == 0);
  // get() (delayctl get, the console) shows the value, and not how it is kept.
  CHECK(field("big", "value") == *big.value);
  CHECK(field("big", "z") == "<nil>");
  CHECK(field("big", "headers") == field("small", "headers"));

  // The claim hands the value out as it came in.
  auto c = store.claim(shard, Ids{"big"}, 10);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].value == big.value);
  CHECK(c[0].key == big.key);
  CHECK(c[0].headers == StoredHeaders{{"trace", "abc"}, {"nullh", std::nullopt}});
}

TEST_CASE_METHOD(Lifecycle, "a kept compressed payload survives a redelivery, and its mark goes with the payload",
                 "[store][compress]") {
  store.compress_payloads_above(256);
  NewJob big = job("k", 10);
  big.value = order_json(2);
  store.accept(std::vector<NewJob>{big}, 0);
  REQUIRE(deliver_again("k", 10, Mode::keep).state == JobState::ready);
  CHECK(record("k").find(" z=1\n") != std::string::npos);  // ready, payload kept for a redelivery
  CHECK(field("k", "value") == *big.value);
  // A failed report sends it round again with its payload; the next claim reads it.
  CHECK(report("k", ReportStatus::failed, 20, 30).state == JobState::delay);
  auto c = store.claim(shard, Ids{"k"}, 30);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].value == big.value);
  CHECK(c[0].attempt == 2);
  // Delivered without keeping it: the payload goes, and z with it.
  const JobStore::Delivered d{"k", c[0].deliver_at, c[0].attempt, "orders", Mode::drop, {}};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 30);
  CHECK(report("k", ReportStatus::finished, 40).state == JobState::finished);
  CHECK(record("k").find("z=1") == std::string::npos);
  CHECK_FALSE(has_payload("k"));
}

TEST_CASE_METHOD(Fixture, "a record marked compressed whose payload does not decompress is set aside, not delivered",
                 "[store][compress]") {
  store.accept(std::vector<NewJob>{job("bad", 5)}, 0);
  set_record("bad", "delay 5 0 orders z=1\nnot a zstd frame");
  CHECK(field("bad", "payload_error").find("compressed payload unreadable") != std::string::npos);
  auto c = store.claim(shard, Ids{"bad"}, 5);
  CHECK(c[0].kind == Claim::Kind::corrupt);
  CHECK(c[0].reason.rfind("corrupt job record: payload unreadable: compressed payload unreadable", 0) == 0);
}

TEST_CASE_METHOD(Fixture, "a store that does not compress reads the records of one that does", "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(100);
  NewJob big = job("w", 5);
  big.value = order_json(3);
  writer.accept(std::vector<NewJob>{big}, 0);
  CHECK(record("w").find(" z=1\n") != std::string::npos);
  CHECK(field("w", "value") == *big.value);  // `store` compresses nothing itself
  auto c = store.claim(shard, Ids{"w"}, 5);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].value == big.value);
}

// kDictionarySamples + 1 jobs of one shard, "<prefix>0" on, whose values are JSON documents: the
// last one is the first a dictionary can compress.
struct Documents : Fixture {
  std::vector<NewJob> documents(const std::string& prefix) {
    std::vector<NewJob> jobs;
    for (std::size_t i = 0; i <= kDictionarySamples; ++i) {
      jobs.push_back(job(prefix + std::to_string(i), 5));
      jobs.back().value = order_json(static_cast<int>(i));
    }
    return jobs;
  }
};

TEST_CASE_METHOD(Documents, "payloads after the first thousand use a dictionary that another process reads from Redis",
                 "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(256);
  const std::vector<NewJob> jobs = documents("d");
  writer.accept(jobs, 0);  // the 1 000th payload trains it; the last is compressed with it
  const auto dictionary = PayloadDictionaries::of(keys.prefix())->current();
  REQUIRE(dictionary);
  const std::string last = "d" + std::to_string(kDictionarySamples);
  const auto payload_of = [&](const std::string& id) { return record(id).substr(record(id).find('\n') + 1); };
  CHECK(dictionary_of(payload_of(last)) == dictionary->id());
  CHECK(dictionary_of(payload_of("d0")) == 0);  // compressed before there was one
  CHECK(payload_of(last).size() < payload_of("d0").size());
  // Counted for /metrics: each payload written compressed, its bytes before and as stored.
  const CompressionTotals totals = writer.compression();
  CHECK(totals.payloads == jobs.size());
  CHECK(totals.dictionary == dictionary->id());
  std::uint64_t stored = 0;
  for (const NewJob& j : jobs) stored += payload_of(j.job_id).size();
  CHECK(totals.stored_bytes == stored);
  CHECK(totals.encoded_bytes > totals.stored_bytes);
  // Kept in the shard of the records that need it, and as the prefix's, before those records.
  CHECK(redis.command({"GET", keys.dictionary(shard, dictionary->id())}).view().str() == dictionary->bytes());
  CHECK(redis.command({"GET", keys.dictionary()}).view().str() == dictionary->bytes());

  // Another process (its own dictionaries: none loaded) reads the records of both kinds.
  PayloadDictionaries::forget(keys.prefix());
  JobStore reader{redis, keys, 3600};
  CHECK(field(last, "value") == *jobs.back().value);  // `store` was made before the forget: it has it
  auto got = reader.get(last);
  REQUIRE(got);
  CHECK(got->at("value") == *jobs.back().value);
  PayloadDictionaries::forget(keys.prefix());
  JobStore claimer{redis, keys, 3600};
  auto c = claimer.claim(shard, Ids{"d0", last}, 5);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  REQUIRE(c[1].kind == Claim::Kind::deliver);
  CHECK(c[0].value == jobs[0].value);
  CHECK(c[1].value == jobs.back().value);

  // A process that starts compressing takes the prefix's dictionary, and writes it into a shard
  // it has not written before, by the post path as well.
  PayloadDictionaries::forget(keys.prefix());
  JobStore next{redis, keys, 3600};
  next.compress_payloads_above(256);
  REQUIRE(PayloadDictionaries::of(keys.prefix())->current());
  CHECK(PayloadDictionaries::of(keys.prefix())->current()->id() == dictionary->id());
  NewJob elsewhere = job("e", 5);
  elsewhere.shard = shard_id("delay-ingest", 1);
  elsewhere.value = order_json(7);
  auto posted = next.accept_post(std::vector<NewJob>{elsewhere}, 0);
  CHECK(next.accept_collect(posted)[0].created());
  CHECK(redis.command({"GET", keys.dictionary(elsewhere.shard, dictionary->id())}).view().str() == dictionary->bytes());
  CHECK(field("e", "value") == *elsewhere.value);
}

TEST_CASE_METHOD(Documents, "redis.compression_dictionary = false compresses each payload alone", "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(256, false);
  const std::vector<NewJob> jobs = documents("a");
  writer.accept(jobs, 0);
  CHECK_FALSE(PayloadDictionaries::of(keys.prefix())->current());
  const std::string r = record("a" + std::to_string(kDictionarySamples));
  CHECK(r.find(" z=1\n") != std::string::npos);
  CHECK(dictionary_of(r.substr(r.find('\n') + 1)) == 0);
  CHECK(redis.command({"EXISTS", keys.dictionary()}).view().integer() == 0);
}

TEST_CASE_METHOD(Documents, "a payload whose dictionary is not in Redis is set aside with that reason",
                 "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(256);
  const std::vector<NewJob> jobs = documents("m");
  writer.accept(jobs, 0);
  const auto dictionary = PayloadDictionaries::of(keys.prefix())->current();
  REQUIRE(dictionary);
  redis.command({"DEL", keys.dictionary(shard, dictionary->id())});
  PayloadDictionaries::forget(keys.prefix());
  JobStore reader{redis, keys, 3600};
  const std::string last = "m" + std::to_string(kDictionarySamples);
  auto got = reader.get(last);
  REQUIRE(got);
  CHECK(got->at("payload_error").find("dictionary " + std::to_string(dictionary->id())) != std::string::npos);
  auto c = reader.claim(shard, Ids{last}, 5);
  CHECK(c[0].kind == Claim::Kind::corrupt);
  CHECK(c[0].reason.find("is not in Redis") != std::string::npos);
}
