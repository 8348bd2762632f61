#include "storage/header_codec.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/job_record.hpp"
#include "storage/payload_compression.hpp"

using delayd::storage::compress_payload;
using delayd::storage::decode_headers;
using delayd::storage::encode_headers;
using delayd::storage::encode_payload;
using delayd::storage::header_field;
using delayd::storage::read_payload;
using delayd::storage::StoredHeaders;

TEST_CASE("headers survive encoding: order, repeats, null and binary values", "[codec]") {
  const StoredHeaders in{
      {"b", "2"}, {"a", std::nullopt}, {"a", ""}, {"bin", std::string("\0\xff\x01", 3)}, {"", "empty name"}};
  CHECK(decode_headers(encode_headers(in)) == in);
  CHECK(decode_headers(encode_headers({})).empty());
}

TEST_CASE("a truncated header blob is refused, not read past its end", "[codec]") {
  const std::string blob = encode_headers({{"name", "value"}});
  for (size_t n = 1; n < blob.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(decode_headers(std::string_view(blob).substr(0, n)), std::invalid_argument);
  }
}

TEST_CASE("a payload survives encoding: null and empty key and value, binary bytes, headers", "[codec]") {
  using delayd::storage::decode_payload;
  using delayd::storage::encode_payload;
  using delayd::storage::StoredPayload;
  const StoredPayload full{std::string("k\0y", 3), std::string(300, 'v'), {{"h", std::nullopt}, {"h", "2"}}};
  CHECK(decode_payload(encode_payload(full)) == full);
  const StoredPayload nulls{std::nullopt, std::nullopt, {}};
  CHECK(decode_payload(encode_payload(nulls)) == nulls);
  const StoredPayload empties{std::string(), std::string(), {}};
  CHECK(decode_payload(encode_payload(empties)) == empties);
  // Cut anywhere inside the key or the value (a cut between two headers would be a valid,
  // shorter payload: the format has no count, only lengths).
  const std::string blob = encode_payload(full);
  const size_t value_end = 1 + 3 + 2 + 300;  // varint lengths: one byte for 3 + 1, two for 300 + 1
  for (size_t n = 1; n < value_end; ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(decode_payload(std::string_view(blob).substr(0, n)), std::invalid_argument);
  }
}

TEST_CASE("lengths are short varints, and a length that cannot be is refused", "[codec]") {
  using delayd::storage::decode_payload;
  using delayd::storage::encode_payload;
  // key null (1 byte), value of 200 (2 bytes of length), header "h"="2" (1 + 1 + 1 + 1).
  CHECK(encode_payload({std::nullopt, std::string(200, 'v'), {{"h", "2"}}}).size() == 1 + 2 + 200 + 4);
  CHECK_THROWS_AS(decode_payload(std::string("\xff\xff\xff\xff\xff\x01", 6)), std::invalid_argument);  // > 5 bytes
  CHECK_THROWS_AS(decode_payload(std::string("\xff\xff\xff\xff\x7f", 5)), std::invalid_argument);      // > 4 GiB
  CHECK_THROWS_AS(decode_headers(std::string("\x00", 1)), std::invalid_argument);          // a null header name
  CHECK_THROWS_AS(decode_payload(std::string("\x81\x00\x01", 3)), std::invalid_argument);  // 1 padded to 2 bytes
}

TEST_CASE("a compressed payload reads back byte for byte, and small or incompressible ones stay as they are",
          "[codec][compress]") {
  std::string json;
  for (int i = 0; i < 40; ++i) json += "{\"sku\":\"SKU-" + std::to_string(i) + "\",\"quantity\":1},";
  const std::string encoded = encode_payload({std::string("k"), json, {{"trace", "abc"}}});
  const auto z = compress_payload(encoded, 100);
  REQUIRE(z);
  CHECK(z->size() < encoded.size() / 2);
  CHECK(read_payload(*z, true) == encoded);
  CHECK(read_payload(encoded, false) == encoded);
  CHECK_FALSE(compress_payload(encoded, encoded.size()));  // not above the threshold
  CHECK_FALSE(compress_payload(encoded, 0));               // 0: never
  std::string noise(2000, '\0');
  std::uint32_t x = 12345;
  for (char& c : noise) c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
  CHECK_FALSE(compress_payload(noise, 100));  // no shorter: kept as it is
  CHECK_THROWS_AS(read_payload("not a frame", true), std::invalid_argument);
  CHECK_THROWS_AS(read_payload(z->substr(0, z->size() / 2), true), std::invalid_argument);
}

TEST_CASE(
    "a dictionary trained from the first payloads compresses the next ones smaller, and names itself in the frame",
    "[codec][compress]") {
  using delayd::storage::CompressionDictionary;
  using delayd::storage::dictionary_of;
  using delayd::storage::kDictionarySamples;
  using delayd::storage::PayloadDictionaries;
  // Documents alike in their names and enum values, unlike in their numbers.
  const auto document = [](int n) {
    std::string s =
        "{\"type\":\"order.payment_timeout\",\"order_id\":\"ord-" + std::to_string(n * 7919) + "\",\"lines\":[";
    for (int i = 0; i < 8; ++i) {
      s += "{\"sku\":\"SKU-" + std::to_string((n * 31 + i * 977) % 100000) +
           "\",\"quantity\":" + std::to_string(1 + (n + i) % 5) + ",\"currency\":\"EUR\",\"warehouse\":\"LIS-1\"},";
    }
    return s + "],\"payment\":{\"method\":\"card\",\"status\":\"pending\"}}";
  };
  PayloadDictionaries dictionaries;
  std::vector<std::pair<std::uint32_t, std::size_t>> told;  // each training's dictionary id and samples
  dictionaries.on_trained([&](const CompressionDictionary* d, std::size_t samples) {
    told.emplace_back(d != nullptr ? d->id() : 0, samples);
  });
  for (std::size_t i = 1; i < kDictionarySamples; ++i)
    CHECK_FALSE(dictionaries.offer(encode_payload({{}, document(int(i)), {}})));
  const auto trained = dictionaries.offer(encode_payload({{}, document(0), {}}));  // the last sample
  REQUIRE(trained);
  CHECK(trained->id() != 0);
  CHECK(dictionaries.current() == trained);
  CHECK(dictionaries.find(trained->id()) == trained);
  CHECK(dictionaries.offer("more") == trained);  // trained once
  CHECK(told == std::vector<std::pair<std::uint32_t, std::size_t>>{{trained->id(), kDictionarySamples}});

  const std::string encoded = encode_payload({std::string("k"), document(123456), {{"trace", "abc"}}});
  const auto plain = compress_payload(encoded, 100);
  const auto with = compress_payload(encoded, 100, trained.get());
  REQUIRE(plain);
  REQUIRE(with);
  CHECK(with->size() < plain->size() / 2);
  CHECK(dictionary_of(*with) == trained->id());
  CHECK(dictionary_of(*plain) == 0);
  CHECK(read_payload(*with, true, &dictionaries) == encoded);
  CHECK(read_payload(*plain, true, &dictionaries) == encoded);  // written before the dictionary
  // A process that has not loaded the dictionary cannot read the frame, and says which it needs.
  PayloadDictionaries other;
  CHECK_THROWS_WITH(read_payload(*with, true, &other), Catch::Contains(std::to_string(trained->id())));
  CHECK_THROWS_AS(read_payload(*with, true), std::invalid_argument);
  // Loaded from the bytes kept in Redis, it reads it; bytes that are no dictionary load nothing.
  CHECK(other.add(trained->bytes(), false) == trained->id());
  CHECK_FALSE(other.current());
  CHECK(read_payload(*with, true, &other) == encoded);
  CHECK(other.add("not a dictionary", true) == 0);
  CHECK_FALSE(other.current());
  CHECK_THROWS_AS(CompressionDictionary("not a dictionary"), std::invalid_argument);
}

TEST_CASE("samples that train no dictionary leave payloads compressed alone, and are not taken again",
          "[codec][compress]") {
  using delayd::storage::CompressionDictionary;
  using delayd::storage::kDictionarySamples;
  using delayd::storage::PayloadDictionaries;
  PayloadDictionaries dictionaries;
  std::vector<std::pair<const CompressionDictionary*, std::size_t>> told;
  dictionaries.on_trained([&](const CompressionDictionary* d, std::size_t samples) { told.emplace_back(d, samples); });
  for (std::size_t i = 0; i < kDictionarySamples; ++i) CHECK_FALSE(dictionaries.offer(""));  // nothing to learn from
  CHECK(told == std::vector<std::pair<const CompressionDictionary*, std::size_t>>{{nullptr, kDictionarySamples}});
  for (std::size_t i = 0; i < kDictionarySamples; ++i) CHECK_FALSE(dictionaries.offer("abcdefgh"));
  CHECK(told.size() == 1);  // tried once
  CHECK_FALSE(dictionaries.current());
}

TEST_CASE("header_field reads one field of a header line, never a word before the fields", "[codec][compress]") {
  CHECK(header_field("delay 5 0 orders z=1\n\x01", "z") == std::optional<std::string_view>("1"));
  CHECK(header_field("delay 5 0 z=1\npayload", "z") == std::nullopt);  // a business named z=1
  CHECK(header_field("delay 5 0 orders zz=1 z=\n", "z") == std::optional<std::string_view>(""));
  CHECK(header_field("delay 5 0 orders nb=7 z=1", "nb") == std::optional<std::string_view>("7"));
  CHECK(header_field("delay 5 0 orders\nz=1 x", "z") == std::nullopt);  // after the line: payload
  CHECK(header_field("", "z") == std::nullopt);
}
