// base/text_encoding.hpp: which bytes count as printable text, where a cut may fall, and base64.
#include "base/text_encoding.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "support/unbase64.hpp"

using delayd::base::base64;
using delayd::base::is_printable_utf8;
using delayd::base::utf8_prefix;

using delayd::testing::unbase64;

TEST_CASE("base64: the test vectors of RFC 4648", "[unit][text]") {
  CHECK(base64("") == "");
  CHECK(base64("f") == "Zg==");
  CHECK(base64("fo") == "Zm8=");
  CHECK(base64("foo") == "Zm9v");
  CHECK(base64("foob") == "Zm9vYg==");
  CHECK(base64("fooba") == "Zm9vYmE=");
  CHECK(base64("foobar") == "Zm9vYmFy");
  CHECK(base64(std::string("\x00\xff\xfe\x80", 4)) == "AP/+gA==");
}

TEST_CASE("base64: every length and every byte round-trips", "[unit][text]") {
  std::mt19937 rng(42);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  CHECK(unbase64(base64(all)) == all);
  for (std::size_t len = 0; len < 64; ++len) {
    std::string bytes;
    for (std::size_t i = 0; i < len; ++i) bytes.push_back(static_cast<char>(rng() & 0xff));
    const std::string text = base64(bytes);
    INFO(len);
    CHECK(text.size() == (len + 2) / 3 * 4);
    CHECK(unbase64(text) == bytes);
  }
}

TEST_CASE("printable UTF-8: text with tabs and newlines is, controls and malformed sequences are not", "[unit][text]") {
  CHECK(is_printable_utf8(""));
  CHECK(is_printable_utf8("{\"order\": 42}"));
  CHECK(is_printable_utf8("line one\n\tline two\r\n"));
  CHECK(is_printable_utf8("<script>alert(1)</script>"));
  CHECK(is_printable_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é, €, an emoji
  CHECK(is_printable_utf8("\xc2\xa0"));                                   // U+00A0, the first after C1
  CHECK(is_printable_utf8("\xf4\x8f\xbf\xbf"));                           // U+10FFFF

  CHECK_FALSE(is_printable_utf8(std::string("a\0b", 3)));  // NUL
  CHECK_FALSE(is_printable_utf8("\x1b[31m"));              // ESC
  CHECK_FALSE(is_printable_utf8("\x7f"));                  // DEL
  CHECK_FALSE(is_printable_utf8("\xc2\x85"));              // U+0085, a C1 control
  CHECK_FALSE(is_printable_utf8("\xff"));
  CHECK_FALSE(is_printable_utf8("\x80"));              // a continuation without a lead
  CHECK_FALSE(is_printable_utf8("\xc3"));              // cut short
  CHECK_FALSE(is_printable_utf8("\xe2\x82"));          // cut short
  CHECK_FALSE(is_printable_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(is_printable_utf8("\xe0\x80\xaf"));      // overlong '/'
  CHECK_FALSE(is_printable_utf8("\xed\xa0\x80"));      // a surrogate, U+D800
  CHECK_FALSE(is_printable_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(is_printable_utf8("\xe2\x28\xa1"));      // a bad continuation
}

TEST_CASE("utf8_prefix never splits a sequence, and leaves short text whole", "[unit][text]") {
  CHECK(utf8_prefix("abc", 5) == "abc");
  CHECK(utf8_prefix("abcdef", 4) == "abcd");
  const std::string euros = "\xe2\x82\xac\xe2\x82\xac";  // two 3-byte characters
  CHECK(utf8_prefix(euros, 6) == euros);
  CHECK(utf8_prefix(euros, 5) == "\xe2\x82\xac");
  CHECK(utf8_prefix(euros, 4) == "\xe2\x82\xac");
  CHECK(utf8_prefix(euros, 3) == "\xe2\x82\xac");
  CHECK(utf8_prefix(euros, 2).empty());
  CHECK(utf8_prefix("\xf0\x9f\x98\x80!", 3).empty());
  // Bytes that are not UTF-8 are cut where asked.
  CHECK(utf8_prefix("\x80\x80\x80\x80\x80", 4) == "\x80\x80\x80\x80");
}
