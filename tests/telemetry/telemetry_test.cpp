// The telemetry room without a collector: W3C traceparent parsing and formatting, span ids, the
// sampler's decisions, the OTLP JSON encoding, and the exporter's promise to drop (and count)
// rather than wait when no collector answers. The exporter against a real receiver, and the whole
// chain through delayd: trace_chain_test.py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "broker/job_spans.hpp"
#include "telemetry/exporter.hpp"
#include "telemetry/log_scope.hpp"
#include "telemetry/otlp_json.hpp"
#include "telemetry/trace_context.hpp"
#include "telemetry/tracer.hpp"

using namespace delayd::telemetry;

namespace {

// A tracer whose collector is never reached (nothing is exported by these tests' sampling cases).
delayd::config::TracingConfig tracing(delayd::config::TraceSampler sampler, double ratio = 1.0) {
  delayd::config::TracingConfig c;
  c.enabled = true;
  c.host = "127.0.0.1";
  c.port = 1;
  c.sampler = sampler;
  c.ratio = ratio;
  return c;
}

}  // namespace

TEST_CASE("traceparent: the recommendation's example reads and writes back") {
  const std::string example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const auto c = parse_traceparent(example);
  REQUIRE(c);
  CHECK(to_hex(c->trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736");
  CHECK(to_hex(c->span_id) == "00f067aa0ba902b7");
  CHECK(c->sampled);
  CHECK(format_traceparent(*c) == example);
  const auto unsampled = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  REQUIRE(unsampled);
  CHECK_FALSE(unsampled->sampled);
  // A later version may add fields after its four.
  CHECK(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"));
}

TEST_CASE("traceparent: what the recommendation says to ignore") {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",         // short
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",        // uppercase
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",        // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",        // zero span id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // 00 is exactly 55
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        // separator
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",        // not hex
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",       // no '-' after the four
       }) {
    INFO(bad);
    CHECK_FALSE(parse_traceparent(bad));
  }
}

TEST_CASE("span ids: random, never zero, a new one each time") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const TraceId t = new_trace_id();
    const SpanId s = new_span_id();
    CHECK(t != TraceId{});
    CHECK(s != SpanId{});
    seen.insert(to_hex(t) + to_hex(s));
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("sampler: each rule's decision for new traces and children") {
  using delayd::config::TraceSampler;
  SpanContext sampled_parent{new_trace_id(), new_span_id(), true};
  SpanContext unsampled_parent{new_trace_id(), new_span_id(), false};
  {
    Tracer t(tracing(TraceSampler::parent_always_on), "test");
    CHECK(t.new_trace(std::nullopt).sampled);
    CHECK(t.child_of(sampled_parent).sampled);
    CHECK_FALSE(t.child_of(unsampled_parent).sampled);
    CHECK_FALSE(t.new_trace(unsampled_parent).sampled);  // follows its link
    const SpanContext child = t.child_of(sampled_parent);
    CHECK(child.trace_id == sampled_parent.trace_id);
    CHECK(child.span_id != sampled_parent.span_id);
    CHECK(t.new_trace(sampled_parent).trace_id != sampled_parent.trace_id);
  }
  {
    Tracer t(tracing(TraceSampler::always_on), "test");
    CHECK(t.child_of(unsampled_parent).sampled);
    Tracer off(tracing(TraceSampler::always_off), "test");
    CHECK_FALSE(off.child_of(sampled_parent).sampled);
    CHECK_FALSE(off.new_trace(std::nullopt).sampled);
  }
  {
    Tracer none(tracing(TraceSampler::ratio, 0.0), "test");
    Tracer quarter(tracing(TraceSampler::ratio, 0.25), "test");
    Tracer quarter_again(tracing(TraceSampler::ratio, 0.25), "test");
    int picked = 0;
    constexpr int kTraces = 20'000;
    for (int i = 0; i < kTraces; ++i) {
      const SpanContext parent{new_trace_id(), new_span_id(), true};
      const bool q = quarter.child_of(parent).sampled;
      CHECK(q == quarter_again.child_of(parent).sampled);  // the trace id decides, the same each time
      CHECK_FALSE(none.child_of(parent).sampled);
      picked += q ? 1 : 0;
    }
    // 20 000 draws at p = 0.25: the standard deviation is 61; 0.23..0.27 is 6.5 of them.
    CHECK(picked > kTraces * 23 / 100);
    CHECK(picked < kTraces * 27 / 100);
  }
}

TEST_CASE("otlp json: lowerCamelCase fields, hex ids, 64-bit integers as strings, enums as numbers") {
  SpanData s;
  s.context = *parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  s.parent = s.context.span_id;
  s.links.push_back(*parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
  s.name = "send ready.orders";
  s.kind = SpanKind::producer;
  s.start = std::chrono::nanoseconds(1'700'000'000'000'000'001);
  s.end = std::chrono::nanoseconds(1'700'000'000'000'000'002);
  s.attributes = {
      {"delayd.job_id", std::string("j\xff")},
      {"delayd.attempt", std::int64_t{2}},
      {"flag", true},
      {"text", std::string_view("quote \" back \\ tab \t nl \n ctl \x01 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")},
      {"bad", std::string("\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82")},
      {"negative", std::int64_t{-5}}};
  s.status = StatusCode::error;
  s.status_message = "refused";
  const Resource r{{{"service.name", "delayd"}}, "0.3.0"};
  const auto j = nlohmann::json::parse(encode_otlp_json(r, std::span<const SpanData>(&s, 1)));
  const auto& rs = j.at("resourceSpans").at(0);
  CHECK(rs.at("resource").at("attributes").at(0).at("value").at("stringValue") == "delayd");
  const auto& ss = rs.at("scopeSpans").at(0);
  CHECK(ss.at("scope").at("name") == "delayd");
  CHECK(ss.at("scope").at("version") == "0.3.0");
  const auto& span = ss.at("spans").at(0);
  CHECK(span.at("traceId") == "4bf92f3577b34da6a3ce929d0e0e4736");
  CHECK(span.at("spanId") == "00f067aa0ba902b7");
  CHECK(span.at("parentSpanId") == "00f067aa0ba902b7");
  CHECK(span.at("links").at(0).at("traceId") == "0af7651916cd43dd8448eb211c80319c");
  CHECK(span.at("kind") == 4);
  CHECK(span.at("startTimeUnixNano") == "1700000000000000001");
  CHECK(span.at("endTimeUnixNano") == "1700000000000000002");
  CHECK(span.at("attributes").at(0).at("value").at("stringValue") == "j\xef\xbf\xbd");  // replaced, not thrown
  CHECK(span.at("attributes").at(1).at("value").at("intValue") == "2");
  CHECK(span.at("attributes").at(2).at("value").at("boolValue") == true);
  // Escapes and valid UTF-8 come back as they were; each byte of an invalid sequence is U+FFFD.
  CHECK(span.at("attributes").at(3).at("value").at("stringValue") ==
        "quote \" back \\ tab \t nl \n ctl \x01 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  const std::string fffd = "\xef\xbf\xbd";
  CHECK(span.at("attributes").at(4).at("value").at("stringValue") ==
        fffd + fffd + " " + fffd + fffd + fffd + " " + fffd + fffd + fffd + fffd + " " + fffd + fffd);
  CHECK(span.at("attributes").at(5).at("value").at("intValue") == "-5");
  CHECK(span.at("status").at("code") == 2);
  CHECK(span.at("status").at("message") == "refused");
}

TEST_CASE("exporter: with no collector listening, spans are dropped and counted, never waited for") {
  ExporterOptions o;
  o.host = "127.0.0.1";
  o.port = 1;  // nothing listens: each POST fails at once (connection refused)
  o.max_queue = 100;
  o.max_batch = 10;
  o.schedule_delay = std::chrono::milliseconds(10);
  o.timeout = std::chrono::milliseconds(500);
  SpanExporter exporter(o);
  constexpr std::uint64_t kSpans = 5000;
  std::uint64_t taken = 0;
  for (std::uint64_t i = 0; i < kSpans; ++i) {
    SpanData s;
    s.context = {new_trace_id(), new_span_id(), true};
    taken += exporter.submit(std::move(s)) ? 1 : 0;
  }
  CHECK(taken <= kSpans);
  exporter.shutdown(std::chrono::seconds(1));
  const ExporterCounters c = exporter.counters();
  CHECK(c.exported == 0);
  CHECK(c.dropped_full == kSpans - taken);
  CHECK(c.dropped_full + c.dropped_failed == kSpans);  // every span accounted for
  // The queue never grew past its bound: the exporter takes at most max_queue spans a round, and
  // after the first failed round it waits a second (the backoff) before the next.
  CHECK(c.dropped_full >= kSpans - 3 * o.max_queue);
  CHECK_FALSE(exporter.submit(SpanData{}));  // after shutdown: refused, counted
  CHECK(exporter.counters().dropped_full == c.dropped_full + 1);
}

TEST_CASE("job spans: the ready record's trace headers, and the producer's context read from a record") {
  const SpanContext producer = *parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  delayd::connectors::Headers h{{"a", "1"},
                                {"traceparent", format_traceparent(producer)},
                                {"tracestate", "vendor=x"},
                                {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}};
  REQUIRE(delayd::broker::trace_context(h));
  CHECK(*delayd::broker::trace_context(h) == producer);  // the first one, as delayd reads headers
  const SpanContext ours{new_trace_id(), new_span_id(), true};
  const delayd::connectors::Headers before = h;
  {
    const delayd::broker::TraceHeaders scope(h, ours);
    REQUIRE(h.size() == 2);
    CHECK(h[0].name == "a");
    CHECK(h[1].name == "traceparent");
    CHECK(h[1].value == format_traceparent(ours));
  }
  CHECK(h == before);  // the producer's headers back, in their places
  delayd::connectors::Headers none{{"a", "1"}};
  {
    const delayd::broker::TraceHeaders scope(none, ours);
    CHECK(none.size() == 2);
  }
  CHECK(none == delayd::connectors::Headers{{"a", "1"}});
  CHECK_FALSE(delayd::broker::trace_context({{"traceparent", "garbage"}}));
  CHECK_FALSE(delayd::broker::trace_context({{"traceparent", std::nullopt}}));
}

TEST_CASE("log scope: the innermost scope names the span, and the previous one comes back") {
  CHECK(LogScope::current() == nullptr);
  const SpanContext a{new_trace_id(), new_span_id(), true};
  const SpanContext b{new_trace_id(), new_span_id(), true};
  {
    const LogScope outer(&a);
    REQUIRE(LogScope::current() != nullptr);
    CHECK(*LogScope::current() == a);
    {
      const LogScope inner(&b);
      CHECK(*LogScope::current() == b);
      const LogScope none(nullptr);
      CHECK(*LogScope::current() == b);
    }
    CHECK(*LogScope::current() == a);
  }
  CHECK(LogScope::current() == nullptr);
}
