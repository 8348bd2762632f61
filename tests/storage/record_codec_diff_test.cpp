// The job record is read twice: by prelude.lua's parse() in every script, and by
// parse_job_record() in C++ (tools, get()). If the two disagreed on what a corrupt record is, a
// record could be delivered by the scripts and shown as corrupt by delayctl, or the other way
// round. This test feeds both the same bytes, good and damaged, the Lua one through EVALSHA on the
// stack's Redis (REDIS_URL), and checks that they agree on the verdict and, for a record that
// reads, on every word, field and the payload, and on where its pending entry belongs
// (pending_score() and prelude.lua's entry_at()).
#include <catch2/catch.hpp>
#include <cstdint>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "record_codec_probe.hpp"
#include "redis/connection.hpp"
#include "redis/url.hpp"
#include "storage/job_record.hpp"
#include "storage/lua_scripts.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd::storage;
using namespace delayd::redis;

namespace {

// A reading in the Lua reply's shape, so that both sides compare as one vector.
using Reading = std::vector<std::string>;

Reading cpp_reading(std::string_view record) {
  const auto r = parse_job_record(record);
  if (!r) return {"0"};
  const std::optional<std::int64_t> entry = pending_score(*r);
  Reading out{
      "1",         std::string(to_string(r->state)), std::to_string(r->deliver_at),       std::to_string(r->attempt),
      r->business, std::string(r->payload),          entry ? std::to_string(*entry) : "-"};
  for (const auto& [name, value] : r->fields) {  // std::map: sorted like table.sort
    out.push_back(name);
    out.push_back(value);
  }
  return out;
}

Reading lua_reading(ReplyView r) {
  if (r.is_error()) return {"error: " + r.error()};
  Reading out;
  for (std::size_t i = 0; i < r.size(); ++i) {
    out.push_back(r[i].is_integer() ? std::to_string(r[i].integer()) : std::string(r[i].str()));
  }
  return out;
}

// The bytes with every one that is not printable ASCII as \xNN, for the failure message.
std::string shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string shown(const Reading& r) {
  std::string out = "{";
  for (const auto& w : r) out += "'" + shown(w) + "' ";
  return out + "}";
}

// Written by hand: each is a way a record could be wrong, or nearly wrong.
std::vector<std::string> edge_cases() {
  using namespace std::string_literals;
  return {
      "",
      "\n",
      "delay 1000 0 orders",  // no newline
      "delay 1000 0 orders\n",
      "delay 1000 0 orders\npayload",
      "ready 1000 3 orders ready_at=1200\n",
      "running 1 1 b running_at=5\n",
      "finished 1 1 b finished_at=5\n",
      "cancelled 0 0 - cancelled_at=5 cancelled_early=1\n",
      "failed 0 0 - failed_at=5 error=corrupt%20job%20record\nwhole old record\n",
      "missing 1000 0 orders\n",  // JobState that is never stored
      "in_flight 1000 0 orders\n",
      "corrupt 1000 0 orders\n",
      "Delay 1000 0 orders\n",  // upper case
      "DELAY 1000 0 orders\n",
      "delayed 1000 0 orders\n",
      "dela 1000 0 orders\n",
      "delay 999999999999999 0 orders\n",   // 15 digits
      "delay 1000000000000000 0 orders\n",  // 16 digits
      "delay 0000000000000001 0 orders\n",  // 16 digits, small value
      "delay 000000000000001 0 orders\n",   // 15 digits with leading zeros
      "delay 1000 999999999 orders\n",      // 9 digits
      "delay 1000 1000000000 orders\n",     // 10 digits
      "delay -1000 0 orders\n",             // negative
      "delay 1000 -1 orders\n",
      "delay +1000 0 orders\n",
      "delay 1e3 0 orders\n",
      "delay 0x10 0 orders\n",
      "delay 1000.5 0 orders\n",
      "delay  1000 0 orders\n",  // two spaces
      "delay 1000  0 orders\n",
      "delay 1000 0  orders\n",  // empty business
      "delay 1000 0 \n",
      "delay 1000 0\n",  // missing business
      "delay 1000\n",
      "delay\n",
      " delay 1000 0 orders\n",             // leading space
      "delay 1000 0 orders \n",             // trailing space
      "delay 1000 0 orders  ready_at=5\n",  // two spaces before a field
      "delay 1000 0 orders ready_at=5 \n",
      "delay\t1000 0 orders\n",  // tabs
      "delay 1000\t0 orders\n",
      "delay 1000 0\torders\n",
      "delay 1000 0 orders\tready_at=5\n",
      "delay 1000 0 orders ready_at=5\tnb=6\n",
      "delay 1000 0 ord\tes\n",
      "delay 1000 0 orders\r\npayload",  // a CRLF line end
      "delay 1000 0 orders\v\n",
      "delay 1000 0 orders\f\n",
      "delay 1000 0 orders ready_at\n",  // field without '='
      "delay 1000 0 orders ready_at=5 h\n",
      "delay 1000 0 orders =5\n",         // empty name
      "delay 1000 0 orders ready_at=\n",  // empty value
      "delay 1000 0 orders last_error= nb=7\n",
      "delay 1000 0 orders ready_at==5\n",  // '=' in a value
      "delay 1000 0 orders a=b=c\n",
      "delay 1000 0 orders ready-at=5\n",  // '-' in a name
      "delay 1000 0 orders ready.at=5\n",
      "delay 1000 0 orders frobnicate=1\n",  // unknown name
      "delay 1000 0 orders FOO_2=x\n",
      "delay 1000 0 orders nb=5 nb=6\n",  // a name twice
      // Where the pending entry belongs (pending_score()): nb only as digits, as deliver_at.
      "delay 1000 0 orders nb=2000\n",
      "delay 3000 0 orders nb=2000\n",
      "delay 1000 0 orders nb=1e4\n",
      "delay 1000 0 orders nb=0x10\n",
      "delay 1000 0 orders nb=1234567890123456\n",  // 16 digits
      "ready 1000 1 orders nb=5000 ma=3\n",         // an ack deadline
      "running 1000 1 orders running_at=1200 nb=6000\n",
      "ready 1000 1 orders nb=\n",
      "finished 1000 1 orders nb=5000\n",
      "delay 1000 0 orders every=60000 count=3 rep=1\n",
      "delay 1000 0 orders every=60000 count=3 rep=1 rd=2 nb=1500 dead=no%20report ma=3 stop=1 h=1\n",
      "delay 1000 0 orders\nline one\nline two\n",  // payload with newlines
      "delay 1000 0 orders\n\n\n",
      "delay 1000 0 ord\xc3\xa9rs\npayload \xff\xfe",  // non-ASCII bytes
      "delay 1000 0 orders error=\xe2\x82\xac\n",
      "delay 1000 0 orders \xc3\xa9=1\n",  // non-ASCII in a name
      "d\xc3\xa9lay 1000 0 orders\n",
      "delay 1000 0 orders\xa0\n",         // NBSP (Latin-1), not white space in "C"
      "delay 1000 0 orders\x85\n",         // NEL
      "delay 1000 0 ord\0rs\npay\0load"s,  // NUL bytes
      "delay 1000 0 orders error=a\0b\n"s,
      "delay 1000 0 orders\0\n"s,
      "delay 1000 0 orders \0=1\n"s,
      "\0delay 1000 0 orders\n"s,
      "delay 1\0000 0 orders\n"s,
      "delay 1000 0 - cancelled_early=1\n",
      "delay 1000 0 -\n",
      "delay 1000 0 orders\n" + std::string(70000, 'x'),  // a long payload
      "delay 1000 0 " + std::string(300, 'b') + "\n",
      "delay 1000 0 orders error=" + std::string(2000, '%') + "\n",
  };
}

// A record delayd could write: random state, numbers, business, some fields, a payload.
std::string valid_record(std::mt19937& rng) {
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  auto digits = [&](std::size_t max) {
    std::string s = std::to_string(std::uniform_int_distribution<std::int64_t>(1, 9)(rng));
    const std::size_t n = pick(max);
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('0' + pick(10)));
    return s;
  };
  static constexpr std::string_view kBizChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
  std::string line(to_string(job_record::kStates[pick(std::size(job_record::kStates))]));
  line += " " + (pick(4) == 0 ? std::string("0") : digits(job_record::kMaxDeliverAtDigits));
  line += " " + (pick(2) == 0 ? std::string("0") : digits(job_record::kMaxAttemptDigits));
  std::string biz;
  for (std::size_t n = 1 + pick(12); biz.size() < n;) biz.push_back(kBizChars[pick(kBizChars.size())]);
  line += " " + (pick(10) == 0 ? std::string("-") : biz);
  for (std::string_view name : job_record::kFields) {
    if (pick(4) != 0) continue;
    const std::size_t kind = pick(3);
    line += " " + std::string(name) + "=" +
            (kind == 0   ? digits(13)
             : kind == 1 ? std::string()
                         : std::string("reported%20failed%3A%0Ax%25"));
  }
  std::string payload;
  for (std::size_t n = pick(40); payload.size() < n;) payload.push_back(static_cast<char>(pick(256)));
  return line + "\n" + payload;
}

// One byte deleted, inserted or replaced, mostly in the header line (where the verdict is made).
std::string mutated(std::string s, std::mt19937& rng) {
  static constexpr char kRaw[] = " \t\n\r\v\f=_-+.%0123456789azAZ\0\x80\xa0\xff";
  static constexpr std::string_view kBytes{kRaw, sizeof kRaw - 1};
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  const std::size_t line_end = s.find('\n') + 1;
  const std::size_t at = pick(5) != 0 ? pick(line_end + 1) : pick(s.size() + 1);
  const char byte = kBytes[pick(kBytes.size())];
  switch (pick(3)) {
    case 0:
      if (at < s.size()) s.erase(at, 1);
      break;
    case 1:
      s.insert(at, 1, byte);
      break;
    default:
      if (at < s.size()) s[at] = byte;
      break;
  }
  return s;
}

}  // namespace

TEST_CASE("the Lua and the C++ reading of a job record agree on every record, good or damaged", "[storage][codec]") {
  RedisConnection redis{delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL"))};
  const std::string script = lua::batch_chunk(delayd::testing::kParseProbe);
  const RedisReply loaded = redis.command({"SCRIPT", "LOAD", script});
  REQUIRE_FALSE(loaded.view().is_error());
  const std::string sha(loaded.view().str());

  std::vector<std::string> inputs = edge_cases();
  const std::size_t hand_written = inputs.size();
  std::mt19937 rng(20240611);
  for (int i = 0; i < 800; ++i) {
    const std::string good = valid_record(rng);
    inputs.push_back(good);
    for (int k = 0; k < 4; ++k) inputs.push_back(mutated(good, rng));
  }

  // The prelude only reads KEYS[1] (for the shard's prefix) and ARGV[1..4]; nothing is written.
  const std::string prefix = delayd::testing::unique_name("codec");
  std::vector<Command> calls;
  for (const auto& in : inputs) {
    calls.push_back({"EVALSHA", sha, "5", prefix + ":{s}:pending", prefix + ":{s}:stats", prefix + ":{s}:quarantine",
                     prefix + ":{s}:inflight", prefix + ":{s}:owner", "0", "0", "0", "", in});
  }
  std::vector<RedisReply> replies;
  for (std::size_t from = 0; from < calls.size(); from += 500) {
    const std::vector<Command> chunk(calls.begin() + static_cast<std::ptrdiff_t>(from),
                                     calls.begin() + static_cast<std::ptrdiff_t>(std::min(calls.size(), from + 500)));
    for (auto& r : redis.pipeline(chunk)) replies.push_back(std::move(r));
  }
  REQUIRE(replies.size() == inputs.size());

  std::size_t good = 0, damaged = 0;
  std::vector<std::string> disagreements;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Reading lua = lua_reading(replies[i].view());
    const Reading cpp = cpp_reading(inputs[i]);
    if (lua != cpp) {
      disagreements.push_back((i < hand_written ? "hand-written '" : "generated '") + shown(inputs[i]) + "': Lua " +
                              shown(lua) + ", C++ " + shown(cpp));
    } else {
      (cpp.front() == "1" ? good : damaged) += 1;
    }
  }
  std::ostringstream summary;
  summary << "record codec: " << inputs.size() << " inputs (" << good << " good, " << damaged << " damaged): ";
  if (disagreements.empty()) {
    summary << "Lua and C++ agree on all";
  } else {
    summary << disagreements.size() << " disagreements";
  }
  std::cout << summary.str() << "\n";
  for (std::size_t i = 0; i < disagreements.size() && i < 30; ++i) UNSCOPED_INFO(disagreements[i]);
  CHECK(disagreements.empty());
  // Both kinds are well represented, or the comparison proves little.
  CHECK(good > inputs.size() / 5);
  CHECK(damaged > inputs.size() / 5);
}

TEST_CASE("format_header_line writes what parse_job_record reads, fields in write()'s order", "[storage][codec]") {
  using delayd::storage::format_header_line;
  using delayd::storage::JobState;
  using delayd::storage::parse_job_record;
  const std::map<std::string, std::string, std::less<>> fields{{"rep", "1"}, {"every", "60000"}, {"not_a_field", "x"}};
  const std::string line = format_header_line(JobState::delay, 1795341600123, 0, "orders", fields);
  // kFields' order (every before rep), and a name write() does not know is not written.
  CHECK(line == "delay 1795341600123 0 orders every=60000 rep=1");
  const std::string record = line + "\npayload";  // payload is a view into it: kept alive
  const auto r = parse_job_record(record);
  REQUIRE(r);
  CHECK(r->state == JobState::delay);
  CHECK(r->deliver_at == 1795341600123);
  CHECK(r->attempt == 0);
  CHECK(r->business == "orders");
  CHECK(r->fields.at("every") == "60000");
  CHECK(r->fields.at("rep") == "1");
  CHECK(r->payload == "payload");
  CHECK(format_header_line(JobState::failed, 5, 3, "b", {}) == "failed 5 3 b");
}
